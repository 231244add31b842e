package envdproxy_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/spf13/pflag"
)

// hung bounds the waits of these tests; the bounds under test are far
// smaller, so it only ends a test that would otherwise hang.
const hung = 20 * time.Second

// rawUpload opens a connection to the proxy and sends an upload's head
// (declaring size bytes) and the first part of its body, then leaves it
// open: the slow client of the probe.
func (e *env) rawUpload(t *testing.T, id, token string, size int, part string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", e.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	head := "POST /files?path=" + url.QueryEscape("/home/user/slow.bin") + " HTTP/1.1\r\n" +
		"Host: " + host(envdproxy.EnvdPort, id) + "\r\n" +
		"X-Access-Token: " + token + "\r\n" +
		"Content-Type: application/octet-stream\r\n" +
		"Content-Length: " + strconv.Itoa(size) + "\r\n\r\n" + part
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	return conn
}

// upload writes body to path in the sandbox and answers the status and
// the answer's body.
func (e *env) upload(t *testing.T, id, token, path string, body io.Reader) (int, string) {
	t.Helper()
	status, b, _ := e.do(http.MethodPost, host(envdproxy.EnvdPort, id), "/files?path="+url.QueryEscape(path), body,
		withToken(token), withHeader("Content-Type", "application/octet-stream"))
	return status, string(b)
}

// socketCount is how many sockets the process holds: the relay, the
// node's side and the guest's side of a request are all sockets. Other
// descriptors (pipes the simulated guests hold, for one) come and go on
// their own schedule and say nothing about a request.
func socketCount() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil && strings.HasPrefix(target, "socket:") {
			n++
		}
	}
	return n
}

// TestStalledUploadIsReleased is the probe through the whole data plane:
// Content-Length 1000, three bytes, silence. The proxy answers 408 within
// its idle bound and closes the connection, and the relay, the node's
// side and the guest's side all go: the process is back at the sockets
// and goroutines it had before.
func TestStalledUploadIsReleased(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, tune: func(c *envdproxy.Config) { c.BodyIdleTimeout = 300 * time.Millisecond }})
	cl := e.claim(0, true)
	tok := accessToken(cl.Token)
	// A whole upload first: it starts the guest's listener and fills the
	// owner cache, which stay, so they belong to the baseline.
	if status, body := e.upload(t, cl.ID, tok, "warm.txt", strings.NewReader("warm")); status != 200 {
		t.Fatalf("warm-up upload: %d %s", status, body)
	}
	e.hc.CloseIdleConnections()
	poll.Until(t, "the proxy to close the warm-up's connection", func() bool { return e.conns.Load() == 0 })
	// The claim's refill starts a warm sandbox, whose guest holds
	// descriptors of its own: on a busy machine it can land after the
	// baseline, so the baseline waits for the pool to be whole again.
	if err := e.fleet.Node(0).WaitWarm(ctxT(t), sandbox.PoolKey{Template: tmpl}.WithDefaults(), 2); err != nil {
		t.Fatalf("the pool refilled after the claim: %v", err)
	}
	goroutines, sockets := runtime.NumGoroutine(), socketCount()

	conn := e.rawUpload(t, cl.ID, tok, 1000, "abc")
	_ = conn.SetReadDeadline(time.Now().Add(hung))
	got, err := io.ReadAll(conn)
	_ = conn.Close()
	if err != nil {
		t.Fatalf("the proxy kept a stalled upload open: %v (answer so far %q)", err, got)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 408 ") {
		t.Fatalf("stalled upload answered %q, want 408", got)
	}

	poll.UntilNil(t, "the stalled upload's goroutines and sockets to go", func() error {
		if g, n := runtime.NumGoroutine(), socketCount(); g > goroutines || n > sockets {
			return leftOver{goroutines: g, baseGoroutines: goroutines, sockets: n, baseSockets: sockets}
		}
		return nil
	})
}

// leftOver takes the goroutines' stacks only when a failure prints it,
// not on every poll.
type leftOver struct{ goroutines, baseGoroutines, sockets, baseSockets int }

func (l leftOver) Error() string {
	buf := make([]byte, 1<<20)
	return fmt.Sprintf("%d goroutines (baseline %d), %d sockets (baseline %d)\n%s",
		l.goroutines, l.baseGoroutines, l.sockets, l.baseSockets, buf[:runtime.Stack(buf, true)])
}

// TestConcurrentUploadCap: past MaxConcurrentUploads a sandbox's next
// upload is 429 while another sandbox's uploads go on; a finished upload
// frees its slot.
func TestConcurrentUploadCap(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, tune: func(c *envdproxy.Config) {
		c.MaxConcurrentUploads = 2
		c.BodyIdleTimeout = time.Minute
	}})
	full, other := e.claim(0, true), e.claim(0, true)
	tok := accessToken(full.Token)
	first := e.rawUpload(t, full.ID, tok, 1000, "abc")
	e.rawUpload(t, full.ID, tok, 1000, "abc")

	// The stalled two take their slots once the proxy has read their
	// heads. A third sent before that would take one of them and leave a
	// stalled upload refused, so the third waits for both.
	poll.Until(t, "the stalled uploads to hold 2 slots", func() bool { return envdproxy.UploadsInFlight(e.proxy, full.ID) >= 2 })
	if status, body := e.upload(t, full.ID, tok, "third.txt", strings.NewReader("third")); status != http.StatusTooManyRequests || !strings.Contains(body, "too many uploads") {
		t.Fatalf("a third upload while two hold the slots = %d %s, want 429", status, body)
	}
	// A refused upload is answered at once, without the proxy waiting
	// for a body it will not read: a stalled client still hears 429.
	stalled := e.rawUpload(t, full.ID, tok, 1000, "abc")
	_ = stalled.SetReadDeadline(time.Now().Add(5 * time.Second))
	answer, err := bufio.NewReader(stalled).ReadString('\n')
	if err != nil || !strings.Contains(answer, " 429 ") {
		t.Fatalf("a stalled upload past the cap was answered %q (%v), want 429 at once", answer, err)
	}
	if status, body := e.upload(t, other.ID, accessToken(other.Token), "x.txt", strings.NewReader("x")); status != 200 {
		t.Fatalf("another sandbox's upload while the first is at its cap: %d %s", status, body)
	}
	// Non-upload requests to the full sandbox are not counted.
	pc := processpbconnect.NewProcessClient(e.sdkClient(full.ID, tok), e.url, connect.WithProtoJSON())
	if out, _ := runCommand(t, pc, "echo ok"); out != "ok\n" {
		t.Fatalf("a command in a sandbox at its upload cap: %q", out)
	}

	_ = first.Close() // the client goes: its slot is freed
	waitStatus(t, http.StatusOK, func() (int, string) {
		return e.upload(t, full.ID, tok, "third.txt", strings.NewReader("third"))
	})
}

// waitStatus repeats call until it answers want.
func waitStatus(t *testing.T, want int, call func() (int, string)) {
	t.Helper()
	poll.UntilNil(t, fmt.Sprintf("an answer %d", want), func() error {
		status, body := call()
		if status != want {
			return fmt.Errorf("answered %d %s", status, body)
		}
		if want == http.StatusTooManyRequests && !strings.Contains(body, "too many uploads") {
			t.Fatalf("429 body %q names no reason", body)
		}
		return nil
	})
}

// TestUploadSizeCap: an upload past MaxUploadBytes is 413, whether it
// declares its size or streams it chunked; one of exactly the limit goes
// through whole.
func TestUploadSizeCap(t *testing.T) {
	const limit = 1000
	e := newEnv(t, envOptions{nodes: 1, tune: func(c *envdproxy.Config) { c.MaxUploadBytes = limit }})
	cl := e.claim(0, true)
	tok := accessToken(cl.Token)
	hc := e.sdkClient(cl.ID, tok)

	status, body := e.upload(t, cl.ID, tok, "declared.bin", strings.NewReader(strings.Repeat("x", limit+1)))
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "limit of 1000 bytes") {
		t.Fatalf("declared oversized upload: %d %s", status, body)
	}
	// No Content-Length: the proxy counts what streams through.
	status, body = e.upload(t, cl.ID, tok, "chunked.bin", io.MultiReader(strings.NewReader(strings.Repeat("y", limit)), strings.NewReader("y")))
	if status != http.StatusRequestEntityTooLarge || !strings.Contains(body, "limit of 1000 bytes") {
		t.Fatalf("chunked oversized upload: %d %s", status, body)
	}
	exact := strings.Repeat("z", limit)
	if status, body := e.upload(t, cl.ID, tok, "exact.bin", io.MultiReader(strings.NewReader(exact))); status != 200 {
		t.Fatalf("upload of exactly the limit: %d %s", status, body)
	}
	req, _ := http.NewRequestWithContext(ctxT(t), http.MethodGet, e.url+"/files?path=exact.bin", nil)
	if status, got := send(t, hc, req); status != 200 || string(got) != exact {
		t.Fatalf("read back the upload of exactly the limit: %d, %d bytes", status, len(got))
	}
}

// TestCommandOutputOutlivesTheBodyBounds: a command's output streams for
// longer than both body bounds, which are about the request body only.
func TestCommandOutputOutlivesTheBodyBounds(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, tune: func(c *envdproxy.Config) {
		c.BodyIdleTimeout = 100 * time.Millisecond
		c.BodyTimeout = 100 * time.Millisecond
	}})
	cl := e.claim(0, true)
	pc := processpbconnect.NewProcessClient(e.sdkClient(cl.ID, accessToken(cl.Token)), e.url, connect.WithProtoJSON())
	out, exit := runCommand(t, pc, "echo a; sleep 0.5; echo b")
	if out != "a\nb\n" || exit != 0 {
		t.Fatalf("command across the body bounds: %q exit %d", out, exit)
	}
}

// TestLimitsFlags: the flags show their defaults, 0 turns a bound off
// (Config's negative), and a negative flag is refused by name.
func TestLimitsFlags(t *testing.T) {
	l := envdproxy.DefaultLimits()
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	l.AddFlags(fs, "envd-proxy-")
	if err := fs.Parse([]string{"--envd-proxy-body-idle-timeout=0", "--envd-proxy-max-upload-bytes=5"}); err != nil {
		t.Fatal(err)
	}
	if err := l.Validate("envd-proxy-"); err != nil {
		t.Fatal(err)
	}
	var c envdproxy.Config
	l.Apply(&c)
	if c.BodyIdleTimeout >= 0 || c.BodyTimeout != serve.DefaultBodyTimeout || c.MaxUploadBytes != 5 ||
		c.MaxConcurrentUploads != envdproxy.DefaultMaxConcurrentUploads {
		t.Fatalf("applied %+v", c)
	}
	l.MaxConcurrentUploads = -1
	if err := l.Validate("envd-proxy-"); err == nil || !strings.Contains(err.Error(), "--envd-proxy-max-concurrent-uploads") {
		t.Fatalf("negative cap: %v", err)
	}
}
