package simfleet_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/codeinterp"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// ciVia reaches one sandbox's code interpreter only through the node's
// guest-port relay, sending token as X-Access-Token when set.
type ciVia struct {
	hc *http.Client
}

func newCIVia(t testing.TB, c *sandboxd.Client, cl *sandboxd.Claim, token string) *ciVia {
	t.Helper()
	sc := c.As(cl.Token)
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return sc.DialPort(ctx, cl.ID, codeinterp.Port)
		},
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &ciVia{hc: &http.Client{Transport: tokenTransport{base: tr, token: token}}}
}

const ciBase = "http://ci.sandbox"

// do sends one request and returns the status and whole body.
func (c *ciVia) do(ctx context.Context, t testing.TB, method, path string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		raw, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, ciBase+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		t.Fatalf("%s %s: read: %v", method, path, err)
	}
	return resp.StatusCode, b
}

// ciLine is one line of an /execute answer.
type ciLine struct {
	Type           string `json:"type"`
	Text           string `json:"text"`
	HTML           string `json:"html"`
	PNG            string `json:"png"`
	IsMainResult   bool   `json:"is_main_result"`
	Name           string `json:"name"`
	Value          string `json:"value"`
	Traceback      string `json:"traceback"`
	ExecutionCount int    `json:"execution_count"`
}

// stream posts a cell and calls each for every line as it arrives.
func (c *ciVia) stream(ctx context.Context, body map[string]any, each func(ciLine)) error {
	raw, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ciBase+"/execute", bytes.NewReader(raw))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		return &statusError{resp.StatusCode, string(msg)}
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		var l ciLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			return err
		}
		each(l)
	}
	return sc.Err()
}

type statusError struct {
	status int
	msg    string
}

func (e *statusError) Error() string { return strconv.Itoa(e.status) + ": " + e.msg }

// run runs a cell to its end and returns its lines, failing the test on
// any transport error or a missing end_of_execution.
func (c *ciVia) run(t testing.TB, body map[string]any) []ciLine {
	t.Helper()
	var lines []ciLine
	if err := c.stream(ctxT(t), body, func(l ciLine) { lines = append(lines, l) }); err != nil {
		t.Fatalf("execute %v: %v", body["code"], err)
	}
	if len(lines) == 0 || lines[len(lines)-1].Type != "end_of_execution" {
		t.Fatalf("execute %v: no end_of_execution last: %+v", body["code"], lines)
	}
	return lines
}

func mainResult(lines []ciLine) (ciLine, bool) {
	for _, l := range lines {
		if l.Type == "result" && l.IsMainResult {
			return l, true
		}
	}
	return ciLine{}, false
}

func errorLine(lines []ciLine) (ciLine, bool) {
	for _, l := range lines {
		if l.Type == "error" {
			return l, true
		}
	}
	return ciLine{}, false
}

// An unisolated node has no Python kernels to give the code interpreter:
// its port answers why instead of nothing.
func TestUnisolatedCodeInterpreterSaysWhy(t *testing.T) {
	f := startFleet(t, simfleet.Config{Pools: []sandboxd.PoolSpec{{Template: "e2b-ci:latest", Warm: 1}}})
	root := clientFor(t, f.Node(0), rootToken)
	cl, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: "e2b-ci:latest"})
	if err != nil {
		t.Fatal(err)
	}
	ci := newCIVia(t, root, cl, "")
	st, body := ci.do(ctxT(t), t, http.MethodPost, "/execute", map[string]any{"code": "1"})
	if st != http.StatusNotImplemented || !strings.Contains(string(body), "isolated") {
		t.Fatalf("execute on an unisolated node = %d %q, want 501 saying it needs isolation", st, body)
	}
}
