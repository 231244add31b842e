package sandboxd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// The fuzz client reads success bodies of at most this many bytes, so a
// padded answer crosses the bound cheaply.
const fuzzMaxBody = 4 << 10

// Operations FuzzNodeAnswers drives; op selects one modulo fuzzOps.
const (
	fuzzClaim = iota
	fuzzClaimCheckpoint
	fuzzInfo
	fuzzSandboxes
	fuzzSandbox
	fuzzCheckpoint
	fuzzCheckpoints
	fuzzPromote
	fuzzDeleteTemplate
	fuzzFork
	fuzzRenew
	fuzzMetrics
	fuzzRelease
	fuzzOwnerPeersStats
	fuzzRelay
	fuzzOps
)

// fuzzAnswer is what the loopback node serves: the first request of an
// operation gets (status1, body1), every later one (status2, body2). A
// relay request gets body1 as raw bytes after its request line.
type fuzzAnswer struct {
	status1, status2 int
	body1, body2     []byte
}

// fuzzNode is one loopback sandboxd stand-in shared by every exec of a
// fuzz worker; the answer and the request count sit behind mu.
type fuzzNode struct {
	srv *httptest.Server
	hc  *http.Client
	// read counts the bytes the client's transport read off its sockets.
	read atomic.Int64

	mu       sync.Mutex
	answer   fuzzAnswer
	requests int
}

func (n *fuzzNode) set(a fuzzAnswer) {
	n.mu.Lock()
	n.answer, n.requests = a, 0
	n.mu.Unlock()
	n.read.Store(0)
}

func (n *fuzzNode) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.requests
}

func (n *fuzzNode) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	a := n.answer
	first := n.requests == 0
	n.requests++
	n.mu.Unlock()
	_, _ = io.Copy(io.Discard, io.LimitReader(r.Body, 1<<20))

	if strings.Contains(r.URL.Path, "/ports/") {
		// The relay handshake: the node's bytes go out verbatim.
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = conn.Write(a.body1)
		return
	}
	status, body := a.status2, a.body2
	if first {
		status, body = a.status1, a.body1
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// countingConn adds the bytes read from a client socket to n.read.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	k, err := c.Conn.Read(p)
	c.n.Add(int64(k))
	return k, err
}

func newFuzzNode(tb testing.TB) *fuzzNode {
	n := &fuzzNode{}
	n.srv = httptest.NewServer(n)
	tb.Cleanup(n.srv.Close)
	target := n.srv.Listener.Addr().String()
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) {
		// Every address a redirect names lands on this loopback node:
		// a fuzzed answer never sends the client off the machine.
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", target)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: conn, n: &n.read}, nil
	}
	n.hc = &http.Client{
		Transport: &http.Transport{
			Proxy:       nil,
			DialContext: dial,
			// An https target is served in the clear by the same node.
			DialTLSContext: dial,
			// Redirects name ever new hosts, and each gets its own idle
			// pool: bound them all, or a long run runs out of descriptors.
			MaxIdleConns:        16,
			MaxIdleConnsPerHost: 16,
			IdleConnTimeout:     time.Second,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return n
}

// fuzzStatus maps a fuzzed number onto a final HTTP status, 200 to 599,
// with the statuses the client branches on made likely.
func fuzzStatus(s uint16) int {
	common := []int{200, 200, 200, 204, 400, 401, 403, 404, 409, 412, 413, 426, 429, 500, 502, 503}
	if s < 0x8000 {
		return common[int(s)%len(common)]
	}
	return 200 + int(s)%400
}

func readGolden(tb testing.TB, name string) []byte {
	raw, err := os.ReadFile(filepath.Join("testdata", "golden", name))
	if err != nil {
		tb.Fatal(err)
	}
	return raw
}

// FuzzNodeAnswers serves fuzzed statuses and bodies from a loopback node
// and drives the client's calls against them. Whatever a node answers,
// the client must not panic, must try at most maxRedirectTargets peers
// (plus the entry node's own retry) for one redirect, must report a
// non-2xx status as that status, must refuse a success body past its
// limit and read no more than the limit (plus an error body's) off the
// socket, and must return a claim only with an id, a token and an owner.
func FuzzNodeAnswers(f *testing.F) {
	g := func(name string) []byte { return readGolden(f, name) }
	claim := g("claim.response.json")
	redirect := g("claim.redirect.response.json")
	errBody := g("error.response.json")
	var many bytes.Buffer
	many.WriteString(`{"redirect":[`)
	for i := range 3 * maxRedirectTargets {
		if i > 0 {
			many.WriteByte(',')
		}
		many.WriteString(`"10.0.0.` + string(rune('a'+i)) + `:7777"`)
	}
	many.WriteString(`]}`)

	seeds := []struct {
		op               int
		status1, status2 uint16
		body1, body2     []byte
		pad              uint16
	}{
		{fuzzClaim, 0, 0, claim, nil, 0},
		{fuzzClaim, 0, 0, g("claim.attach-only.response.json"), nil, 0},
		{fuzzClaim, 0, 0, redirect, claim, 0},
		{fuzzClaim, 0, 12, redirect, errBody, 0}, // every peer at capacity, entry 200
		{fuzzClaim, 0, 4, many.Bytes(), errBody, 0},
		{fuzzClaim, 0, 0, many.Bytes(), redirect, 0},
		{fuzzClaim, 0, 0, []byte(`{"redirect":["ftp://x","http://[::1","127.0.0.1:1/p?q"]}`), []byte(`{"id":"sb_1"}`), 0},
		{fuzzClaim, 12, 0, errBody, nil, 0},
		{fuzzClaim, 0, 0, claim, nil, 300},
		{fuzzClaimCheckpoint, 0, 0, g("checkpoint-claim.response.json"), nil, 0},
		{fuzzClaimCheckpoint, 0, 0, g("checkpoint-claim.redirect.response.json"), g("checkpoint-claim.response.json"), 0},
		{fuzzInfo, 0, 0, g("info.response.json"), nil, 0},
		{fuzzInfo, 0, 0, g("info.cluster.response.json"), nil, 0},
		{fuzzInfo, 0, 0, g("drain.response.json"), nil, 0},
		{fuzzInfo, 10, 0, g("error.body-too-large.response.json"), nil, 0},
		{fuzzSandboxes, 0, 0, g("sandboxes.response.json"), nil, 0},
		{fuzzSandboxes, 0, 0, g("sandboxes.response.json"), nil, 0xffff},
		{fuzzSandbox, 0, 0, g("sandbox.response.json"), nil, 0},
		{fuzzCheckpoint, 0, 0, g("checkpoint.response.json"), nil, 0},
		{fuzzCheckpoints, 0, 0, []byte(`{"checkpoints":[` + string(g("checkpoint.response.json")) + `]}`), nil, 0},
		{fuzzPromote, 0, 0, g("promote.response.json"), nil, 0},
		{fuzzDeleteTemplate, 0, 3, g("templates.delete.redirect.response.json"), nil, 0},
		{fuzzDeleteTemplate, 0, 9, many.Bytes(), errBody, 0},
		{fuzzDeleteTemplate, 3, 0, nil, nil, 0},
		{fuzzFork, 0, 0, g("fork.response.json"), nil, 0},
		{fuzzRenew, 0, 0, g("renew.response.json"), nil, 0},
		{fuzzMetrics, 0, 0, []byte("# HELP x\nx 1\n"), nil, 0},
		{fuzzMetrics, 0, 0, []byte("x 1\n"), nil, 400},
		{fuzzRelease, 7, 0, errBody, nil, 0},
		{fuzzOwnerPeersStats, 0, 0, g("owner.response.json"), nil, 0},
		{fuzzOwnerPeersStats, 0, 0, g("peers.response.json"), nil, 1},
		{fuzzOwnerPeersStats, 0, 0, g("stats.response.json"), nil, 2},
		{fuzzRelay, 0, 0, []byte("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nguest bytes"), nil, 0},
		{fuzzRelay, 0, 0, []byte("HTTP/1.1 502 Bad Gateway\r\nContent-Length: 33\r\n\r\n{\"error\": \"guest unreachable\"}"), nil, 0},
		{fuzzRelay, 0, 0, []byte("HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n"), nil, 0},
		{fuzzRelay, 0, 0, []byte("HTTP/1.1 101 OK\r\nUpgrade: tcp\r\n"), nil, 0},
	}
	for _, s := range seeds {
		f.Add(uint8(s.op), s.status1, s.body1, s.status2, s.body2, s.pad)
	}

	node := newFuzzNode(f)
	addr := node.srv.Listener.Addr().String()
	f.Fuzz(func(t *testing.T, op uint8, status1 uint16, body1 []byte, status2 uint16, body2 []byte, pad uint16) {
		a := fuzzAnswer{status1: fuzzStatus(status1), status2: fuzzStatus(status2), body1: body1, body2: body2}
		if pad > 0 {
			// Trailing whitespace keeps valid JSON valid, so only the
			// size bound can refuse it.
			a.body1 = append(bytes.Clone(body1), bytes.Repeat([]byte(" "), int(pad)*16)...)
		}
		node.set(a)
		c, err := New(addr, WithToken("root"), WithHTTPClient(node.hc), WithMaxResponseBytes(fuzzMaxBody))
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()

		// single checks a call that makes exactly one request and
		// decodes (or keeps) the first answer's body.
		single := func(err error, decodes bool) {
			t.Helper()
			if n := node.count(); n != 1 {
				t.Fatalf("one call made %d requests", n)
			}
			checkStatus(t, a.status1, err)
			okStatus := a.status1 >= 200 && a.status1 <= 299
			if decodes && okStatus && a.status1 != http.StatusNoContent && len(a.body1) > fuzzMaxBody && !errors.Is(err, ErrResponseTooLarge) {
				t.Fatalf("a %d-byte answer past the %d-byte limit gave %v, want ErrResponseTooLarge", len(a.body1), fuzzMaxBody, err)
			}
		}

		switch int(op) % fuzzOps {
		case fuzzClaim, fuzzClaimCheckpoint:
			var cl *Claim
			if int(op)%fuzzOps == fuzzClaim {
				cl, err = c.Claim(ctx, ClaimRequest{Template: "base", ClaimRef: "ns/name", Metadata: map[string]string{"k": "v"}})
			} else {
				cl, err = c.ClaimCheckpoint(ctx, "ck_1", CheckpointClaimRequest{ClaimRef: "ns/name"})
			}
			// The first answer, up to maxRedirectTargets peers, then the
			// entry node once more.
			if n := node.count(); n > maxRedirectTargets+2 {
				t.Fatalf("one claim made %d requests; a redirect is followed to at most %d peers", n, maxRedirectTargets)
			}
			if err != nil {
				if cl != nil {
					t.Fatalf("claim failed (%v) but returned %+v", err, cl)
				}
				if a.status1 < 200 || a.status1 > 299 {
					checkStatus(t, a.status1, err)
				}
				break
			}
			if cl == nil || cl.ID == "" || cl.Token == "" || cl.OwnerAddr == "" {
				t.Fatalf("claim succeeded with %+v: a claim carries an id, a token and an owner", cl)
			}
			if !servedClaim(a.body1, cl) && !servedClaim(a.body2, cl) {
				t.Fatalf("claim %+v is none the node granted", cl)
			}
		case fuzzInfo:
			_, err = c.Info(ctx)
			single(err, true)
		case fuzzSandboxes:
			var list []Sandbox
			list, err = c.SandboxesMatching(ctx, "ns/name", map[string]string{"team": "a b", "x": "="})
			single(err, true)
			if err != nil && list != nil {
				t.Fatalf("index read failed (%v) but returned %d rows", err, len(list))
			}
		case fuzzSandbox:
			_, err = c.Sandbox(ctx, "sb_1")
			single(err, true)
		case fuzzCheckpoint:
			var ck *Checkpoint
			ck, err = c.Checkpoint(ctx, "sb_1", CheckpointRequest{Token: "t", Name: "n"})
			single(err, true)
			if err != nil && ck != nil {
				t.Fatalf("checkpoint failed (%v) but returned %+v", err, ck)
			}
		case fuzzCheckpoints:
			_, err = c.Checkpoints(ctx)
			single(err, true)
		case fuzzPromote:
			var res *PromoteResult
			res, err = c.Promote(ctx, "sb_1", PromoteRequest{Token: "t", Template: "tpl"})
			single(err, true)
			if (err == nil) == (res == nil) {
				t.Fatalf("promote returned %+v with %v", res, err)
			}
		case fuzzDeleteTemplate:
			err = c.DeleteTemplate(ctx, sandbox.PoolKey{Template: "tpl"}, "sha256:00")
			if n := node.count(); n > maxRedirectTargets+1 {
				t.Fatalf("one template delete made %d requests; a redirect is followed to at most %d peers", n, maxRedirectTargets)
			}
			if a.status1 < 200 || a.status1 > 299 {
				checkStatus(t, a.status1, err)
			}
		case fuzzFork:
			var children []Claim
			children, err = c.Fork(ctx, "sb_1", ForkRequest{Token: "t", Count: 2})
			single(err, true)
			for _, ch := range children {
				if ch.OwnerAddr == "" {
					t.Fatalf("fork child %+v has no owner", ch)
				}
			}
		case fuzzRenew:
			_, err = c.Renew(ctx, "sb_1", 60)
			single(err, true)
		case fuzzMetrics:
			var text string
			text, err = c.Metrics(ctx)
			single(err, true)
			if len(text) > fuzzMaxBody {
				t.Fatalf("Metrics returned %d bytes past the %d-byte limit", len(text), fuzzMaxBody)
			}
		case fuzzRelease:
			err = c.Release(ctx, "sb_1")
			single(err, false)
		case fuzzOwnerPeersStats:
			switch pad % 3 {
			case 0:
				_, err = c.Owner(ctx, "sb_1")
			case 1:
				_, err = c.Peers(ctx)
			default:
				_, err = c.Stats(ctx, "sb_1")
			}
			single(err, true)
		case fuzzRelay:
			checkRelay(ctx, t, c, a.body1)
		}

		// Each request may read a success body up to the limit or an
		// error body up to its own, plus headers and the transport's
		// read-ahead; an unbounded read of a padded answer reads it all.
		if n, max := node.read.Load(), int64(node.count())*(fuzzMaxBody+maxErrorBytes+16<<10); n > max {
			t.Fatalf("the client read %d bytes off the socket for %d requests (bound %d)", n, node.count(), max)
		}
	})
}

// checkStatus requires a non-2xx status to come back as an error carrying
// that status, and a 2xx one not to.
func checkStatus(t *testing.T, status int, err error) {
	t.Helper()
	if status >= 200 && status <= 299 {
		if StatusOf(err) != 0 {
			t.Fatalf("a %d answer gave an API error: %v", status, err)
		}
		return
	}
	if err == nil || StatusOf(err) != status {
		t.Fatalf("a %d answer gave %v (status %d)", status, err, StatusOf(err))
	}
}

// servedClaim reports whether body is a non-redirect claim answer that
// grants cl.
func servedClaim(body []byte, cl *Claim) bool {
	var r ClaimResponse
	if json.Unmarshal(body, &r) != nil || r.IsRedirect() {
		return false
	}
	return r.ID == cl.ID && r.Token == cl.Token
}

// checkRelay dials the relay against raw handshake bytes: a connection
// comes back only for a 101 that upgrades to tcp, and it yields the bytes
// that followed the handshake.
func checkRelay(ctx context.Context, t *testing.T, c *Client, raw []byte) {
	t.Helper()
	conn, err := c.DialPort(ctx, "sb_1", EnvdPort)
	if err != nil {
		if conn != nil {
			t.Fatalf("relay failed (%v) but returned a connection", err)
		}
		return
	}
	defer conn.Close()
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	if !bytes.HasPrefix(line, []byte("HTTP/1.")) || !bytes.Contains(line, []byte(" 101")) {
		t.Fatalf("relay accepted a handshake whose status line is %q", line)
	}
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	got, _ := io.ReadAll(io.LimitReader(conn, int64(len(raw))+1))
	if len(got) > len(raw) {
		t.Fatalf("relay yielded %d bytes from a %d-byte answer", len(got), len(raw))
	}
	if !bytes.HasSuffix(raw, got) {
		t.Fatalf("relay yielded %q, which does not end the node's answer", got)
	}
}
