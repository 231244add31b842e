package serve_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// bound is how long the tests wait for something that must happen well
// within the (much smaller) bounds under test; it only fails a hung test.
const bound = 20 * time.Second

// bodyReader answers 408 when reading the body timed out, 200 with the
// byte count otherwise, and reports the read error.
func bodyReader(readErr chan<- error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.Copy(io.Discard, r.Body)
		readErr <- err
		if serve.IsBodyTimeout(err) {
			http.Error(w, err.Error(), http.StatusRequestTimeout)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
}

// listen serves h with cfg's body bounds on a loopback port until the
// test ends.
func listen(t *testing.T, cfg serve.ServerConfig) string {
	t.Helper()
	cfg.Name, cfg.Addr = "test", "127.0.0.1:0"
	s, err := serve.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(s)
	t.Cleanup(func() { _ = stop() })
	return s.Addr().String()
}

// openFDs is how many file descriptors the process holds; -1 where /proc
// is not there.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents)
}

// waitBack waits until the goroutine and fd counts are back at (or under)
// the baseline, and fails the test with the counts when they never are.
func waitBack(t *testing.T, goroutines, fds int) {
	t.Helper()
	poll.UntilNil(t, "the goroutine and fd counts to come back to the baseline after the client went", func() error {
		g, f := runtime.NumGoroutine(), openFDs()
		if g <= goroutines && f <= fds {
			return nil
		}
		return leftBehind{g, goroutines, f, fds}
	})
}

// leftBehind is waitBack's last observation. Its message carries every
// goroutine's stack, taken when the failure is reported rather than on
// every poll.
type leftBehind struct{ g, goroutines, f, fds int }

func (e leftBehind) Error() string {
	buf := make([]byte, 1<<20)
	return fmt.Sprintf("%d goroutines (baseline %d), %d fds (baseline %d)\n%s", e.g, e.goroutines, e.f, e.fds, buf[:runtime.Stack(buf, true)])
}

// TestStalledBodyIsCut is the probe: Content-Length 1000, three bytes,
// then silence. The server must give up within the idle bound, answer and
// close the connection, and hold nothing of it afterwards.
func TestStalledBodyIsCut(t *testing.T) {
	readErr := make(chan error, 1)
	addr := listen(t, serve.ServerConfig{Handler: bodyReader(readErr), BodyIdleTimeout: 200 * time.Millisecond})
	// One whole exchange first, so the listener's own goroutines are up
	// before the baseline is taken.
	warm, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.WriteString(warm, "POST / HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Length: 1\r\n\r\na")
	_, _ = io.ReadAll(warm)
	_ = warm.Close()
	<-readErr
	goroutines, fds := runtime.NumGoroutine(), openFDs()

	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(conn, "POST /files HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	// The answer, then EOF: the server closes a connection whose body it
	// gave up on rather than waiting for the rest.
	got, err := io.ReadAll(conn)
	_ = conn.Close()
	if err != nil {
		t.Fatalf("the server kept the stalled connection open: %v (read so far %q)", err, got)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 408 ") || !strings.Contains(string(got), "no data for 200ms") {
		t.Fatalf("answer to a stalled body = %q, want a 408 naming the idle bound", got)
	}
	if err := <-readErr; !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("handler read error = %v, want a deadline", err)
	}
	waitBack(t, goroutines, fds)
}

// TestTrickledBodyHitsTheTotalBound keeps every byte inside the idle
// bound; the total bound still ends the body.
func TestTrickledBodyHitsTheTotalBound(t *testing.T) {
	readErr := make(chan error, 1)
	addr := listen(t, serve.ServerConfig{Handler: bodyReader(readErr), BodyIdleTimeout: 5 * time.Second, BodyTimeout: 300 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	go func() {
		for range 100000 {
			if _, err := conn.Write([]byte{'x'}); err != nil {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	select {
	case err := <-readErr:
		var te *serve.BodyTimeoutError
		if !errors.As(err, &te) || te.Idle || te.Limit != 300*time.Millisecond {
			t.Fatalf("read error = %v, want the total bound", err)
		}
	case <-time.After(bound):
		t.Fatal("a trickled body was never cut")
	}
}

// TestLongResponseAfterBodyOutlivesTheIdleBound is a server stream after
// a short request (a Connect server-streaming RPC, process output): the
// idle bound is about the body only, and must not cancel the request once
// the body is in.
func TestLongResponseAfterBodyOutlivesTheIdleBound(t *testing.T) {
	const idle = 100 * time.Millisecond
	var canceled atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc := http.NewResponseController(w)
		for i := range 8 {
			select {
			case <-r.Context().Done():
				canceled.Store(true)
				return
			case <-time.After(idle):
			}
			_, _ = io.WriteString(w, strings.Repeat("x", i+1)+"\n")
			_ = rc.Flush()
		}
	})
	addr := listen(t, serve.ServerConfig{Handler: h, BodyIdleTimeout: idle, BodyTimeout: idle})
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", strings.NewReader("request"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines++
	}
	if lines != 8 || canceled.Load() {
		t.Fatalf("streamed %d of 8 lines (request canceled: %v): the body bound cut the response", lines, canceled.Load())
	}
}

// TestUpgradedConnectionIsNotBounded relays bytes over a hijacked
// connection long past the idle bound (a WebSocket, a pty relay).
func TestUpgradedConnectionIsNotBounded(t *testing.T) {
	const idle = 100 * time.Millisecond
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// A body on an Upgrade request is read first, under the bound.
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
		_, _ = io.Copy(conn, brw)
	})
	addr := listen(t, serve.ServerConfig{Handler: h, BodyIdleTimeout: idle, BodyTimeout: idle})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(bound))
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\nContent-Length: 2\r\n\r\nhi"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v %v", resp, err)
	}
	for i := range 3 {
		time.Sleep(3 * idle)
		if _, err := io.WriteString(conn, "ping\n"); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
		line, err := br.ReadString('\n')
		if err != nil || line != "ping\n" {
			t.Fatalf("echo %d after %v of silence = %q, %v: the relay was cut", i, 3*idle, line, err)
		}
	}
}

// TestStalledHTTP2BodyIsCut is the probe over cleartext HTTP/2: the
// bound is per stream there.
func TestStalledHTTP2BodyIsCut(t *testing.T) {
	readErr := make(chan error, 1)
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	addr := listen(t, serve.ServerConfig{Handler: bodyReader(readErr), Protocols: p, BodyIdleTimeout: 200 * time.Millisecond})

	cp := new(http.Protocols)
	cp.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: cp}
	defer tr.CloseIdleConnections()
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write([]byte("abc")) }()
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/", pr)
	req.ContentLength = 1000
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != http.StatusRequestTimeout {
		t.Fatalf("stalled HTTP/2 body: %s %d, want HTTP/2 408", resp.Proto, resp.StatusCode)
	}
	if err := <-readErr; !serve.IsBodyTimeout(err) {
		t.Fatalf("handler read error = %v", err)
	}
}

// TestNestedBoundsTighten: a handler that bounds bodies itself (the envd
// proxy) inside a server that already does gets the stricter bound, once.
func TestNestedBoundsTighten(t *testing.T) {
	readErr := make(chan error, 1)
	inner := serve.BoundBodies(bodyReader(readErr), serve.BodyLimits{Idle: 150 * time.Millisecond})
	addr := listen(t, serve.ServerConfig{Handler: inner, BodyIdleTimeout: time.Hour})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\nab"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-readErr:
		var te *serve.BodyTimeoutError
		if !errors.As(err, &te) || !te.Idle || te.Limit != 150*time.Millisecond {
			t.Fatalf("read error = %v, want the inner idle bound", err)
		}
	case <-time.After(bound):
		t.Fatal("the inner, stricter bound was not applied")
	}
}

// TestUnreadStalledBodyIsCut: a handler answers without reading the body
// (a 404, a refused token); net/http then reads the rest itself before
// reusing the connection, and that read is bounded too.
func TestUnreadStalledBodyIsCut(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.NotFound(w, nil) })
	addr := listen(t, serve.ServerConfig{Handler: h, BodyIdleTimeout: 200 * time.Millisecond})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST /nowhere HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nabc"); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(bound))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the server kept waiting for an unread stalled body: %v (read so far %q)", err, got)
	}
	if !strings.HasPrefix(string(got), "HTTP/1.1 404 ") {
		t.Fatalf("answer = %q", got)
	}
}

// TestAbandonedBodyIsNotReadAsARequest: a full-duplex handler that leaves
// most of a large body unread makes net/http close the connection rather
// than parse the rest as the next request. The bounded body must not hide
// the abandoned one from it (it does not replace the server's request
// body).
func TestAbandonedBodyIsNotReadAsARequest(t *testing.T) {
	paths := make(chan string, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		paths <- r.URL.Path
		// Full duplex, as the envd proxy serves HTTP/1: net/http then
		// leaves the unread body to its check after the handler.
		_ = http.NewResponseController(w).EnableFullDuplex()
		_, _ = io.CopyN(io.Discard, r.Body, 10)
		w.WriteHeader(http.StatusNoContent)
	})
	addr := listen(t, serve.ServerConfig{Handler: h, BodyIdleTimeout: time.Minute})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(bound))
	inner := "GET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	body := strings.Repeat("x", 10) + inner + strings.Repeat("y", 300<<10)
	// The client sends the body in full while reading nothing: write it
	// from a goroutine, since the server may stop reading part way.
	go func() {
		_, _ = io.WriteString(conn, "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
	}()
	_, _ = io.ReadAll(conn)
	close(paths)
	var seen []string
	for p := range paths {
		seen = append(seen, p)
	}
	if len(seen) != 1 || seen[0] != "/upload" {
		t.Fatalf("requests the server saw on the connection: %q; the rest of an abandoned body was parsed as a request", seen)
	}
}
