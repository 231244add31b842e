package envd

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb/filesystempbconnect"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
)

const testToken = "0123456789abcdef-test-token"

// wire is one way of reaching the guest's RPCs.
type wire struct {
	name string
	h2c  bool
	opts []connect.ClientOption
}

// wires covers what the SDK uses (Connect, JSON, HTTP/1.1 through the
// proxy) and what connect-go offers on top (binary, gRPC over h2c).
var wires = []wire{
	{name: "http1-connect-json", opts: []connect.ClientOption{connect.WithProtoJSON()}},
	{name: "h2c-connect-binary", h2c: true},
	{name: "h2c-grpc", h2c: true, opts: []connect.ClientOption{connect.WithGRPC()}},
}

type fixture struct {
	t     *testing.T
	guest *Guest
	srv   *httptest.Server
	root  string
}

// newFixture serves a guest with testToken over a loopback httptest server.
func newFixture(t *testing.T, mutate func(*Config)) *fixture {
	t.Helper()
	cfg := Config{Root: t.TempDir(), AccessToken: testToken}
	if mutate != nil {
		mutate(&cfg)
	}
	g, err := NewHandler(cfg)
	if err != nil {
		t.Fatalf("NewHandler: %v", err)
	}
	srv := httptest.NewServer(g)
	t.Cleanup(srv.Close)
	t.Cleanup(func() {
		if err := g.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return &fixture{t: t, guest: g, srv: srv, root: g.Root()}
}

// headerRoundTripper adds fixed headers, as the SDK's fetch wrapper does.
type headerRoundTripper struct {
	base   http.RoundTripper
	header http.Header
}

func (h headerRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.header {
		r.Header[k] = v
	}
	return h.base.RoundTrip(r)
}

// client returns an HTTP client speaking HTTP/1.1 or h2c (prior
// knowledge), sending token (if any) as X-Access-Token.
func (f *fixture) client(h2c bool, token string) *http.Client {
	tr := &http.Transport{}
	if h2c {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr.Protocols = &p
	}
	f.t.Cleanup(tr.CloseIdleConnections)
	hdr := http.Header{}
	if token != "" {
		hdr.Set("X-Access-Token", token)
	}
	return &http.Client{Transport: headerRoundTripper{base: tr, header: hdr}}
}

func (f *fixture) process(w wire) processpbconnect.ProcessClient {
	return processpbconnect.NewProcessClient(f.client(w.h2c, testToken), f.srv.URL, w.opts...)
}

func (f *fixture) filesystem(w wire) filesystempbconnect.FilesystemClient {
	return filesystempbconnect.NewFilesystemClient(f.client(w.h2c, testToken), f.srv.URL, w.opts...)
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// bashCommand is what the SDK's commands.run sends for cmd.
func bashCommand(cmd string) *processpb.ProcessConfig {
	return &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}}
}

// outcome is everything one Start/Connect stream carried.
type outcome struct {
	pid        uint32
	stdout     bytes.Buffer
	stderr     bytes.Buffer
	pty        bytes.Buffer
	keepalives int
	end        *processpb.ProcessEvent_EndEvent
}

// eventStream is what Start and Connect streams have in common.
type eventStream interface {
	Receive() bool
	Err() error
}

func eventOf(s eventStream) *processpb.ProcessEvent {
	switch v := s.(type) {
	case *connect.ServerStreamForClient[processpb.StartResponse]:
		return v.Msg().GetEvent()
	case *connect.ServerStreamForClient[processpb.ConnectResponse]:
		return v.Msg().GetEvent()
	}
	panic("unknown stream")
}

// readStart reads the first event, which must be the start event.
func readStart(t *testing.T, s eventStream) uint32 {
	t.Helper()
	if !s.Receive() {
		t.Fatalf("stream ended before the start event: %v", s.Err())
	}
	start := eventOf(s).GetStart()
	if start == nil || start.GetPid() == 0 {
		t.Fatalf("first event is not a start event with a pid: %v", eventOf(s))
	}
	return start.GetPid()
}

// drain reads the rest of a stream into o, until it ends.
func drain(t *testing.T, s eventStream, o *outcome) {
	t.Helper()
	for s.Receive() {
		ev := eventOf(s)
		switch {
		case ev.GetData() != nil:
			d := ev.GetData()
			o.stdout.Write(d.GetStdout())
			o.stderr.Write(d.GetStderr())
			o.pty.Write(d.GetPty())
		case ev.GetKeepalive() != nil:
			o.keepalives++
		case ev.GetEnd() != nil:
			if o.end != nil {
				t.Fatalf("second end event")
			}
			o.end = ev.GetEnd()
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream failed: %v", err)
	}
	if o.end == nil {
		t.Fatalf("stream ended without an end event")
	}
}

// run starts cmd and collects its whole stream.
func run(t *testing.T, c processpbconnect.ProcessClient, req *processpb.StartRequest) *outcome {
	t.Helper()
	s, err := c.Start(testContext(t), connect.NewRequest(req))
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	defer s.Close()
	o := &outcome{pid: readStart(t, s)}
	drain(t, s, o)
	return o
}

// sign is the e2b SDK's URL signature, written independently of the
// server's: base64 with its padding trimmed.
func sign(path, op, user, token string, exp int64) string {
	raw := path + ":" + op + ":" + user + ":" + token
	if exp != 0 {
		raw += ":" + strconv.FormatInt(exp, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + strings.TrimRight(base64.StdEncoding.EncodeToString(sum[:]), "=")
}

// filesURL builds /files?path=&username=... with extra query values.
func (f *fixture) filesURL(path string, extra url.Values) string {
	q := url.Values{}
	if path != "" {
		q.Set("path", path)
	}
	for k, v := range extra {
		q[k] = v
	}
	return f.srv.URL + "/files?" + q.Encode()
}

// multipartBody builds a form with one "file" part per name → content.
func multipartBody(t *testing.T, files [][2]string) (io.Reader, string) {
	t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, f := range files {
		// Like the SDK's FormData, the part's filename is the whole
		// destination path.
		w, err := mw.CreateFormFile("file", f[0])
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(w, f[1])
	}
	mw.Close()
	return &buf, mw.FormDataContentType()
}

func do(t *testing.T, c *http.Client, method, u, contentType string, body io.Reader, hdr http.Header) (int, []byte, http.Header) {
	t.Helper()
	req, err := http.NewRequestWithContext(testContext(t), method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

// wantErrorBody checks envd's {"code","message"} error document.
func wantErrorBody(t *testing.T, body []byte, status int) {
	t.Helper()
	var e struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("error body %q is not JSON: %v", body, err)
	}
	if e.Code != status || e.Message == "" {
		t.Fatalf("error body %q: want code %d and a message", body, status)
	}
}

func wantCode(t *testing.T, err error, code connect.Code) {
	t.Helper()
	if got := connect.CodeOf(err); err == nil || got != code {
		t.Fatalf("got error %v (code %v), want code %v", err, got, code)
	}
}
