package serve_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// serveInBackground serves s until the returned cancel, whose result is
// Serve's.
func serveInBackground(s *serve.Server) (cancel func() error) {
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	return func() error { stop(); return <-done }
}

func get(url string) (int, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}

func TestShutdownDrainsTheRequestInFlight(t *testing.T) {
	started, release := make(chan struct{}), make(chan struct{})
	s, err := serve.Listen(serve.ServerConfig{Name: "api", Addr: "127.0.0.1:0", Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		close(started)
		<-release
		w.WriteHeader(http.StatusTeapot)
	})})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(s)
	got := make(chan int, 1)
	go func() { code, _ := get("http://" + s.Addr().String() + "/"); got <- code }()
	<-started
	stopped := make(chan error, 1)
	go func() { stopped <- stop() }()
	// The listener closes at once, while the request is still in flight.
	waitRefused(t, s.Addr().String())
	select {
	case err := <-stopped:
		t.Fatalf("Serve returned (%v) before the request in flight was answered", err)
	default:
	}
	close(release)
	if code := <-got; code != http.StatusTeapot {
		t.Fatalf("in-flight request = %d, want it answered during the drain", code)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("Serve = %v after a clean drain", err)
	}
}

func waitRefused(t *testing.T, addr string) {
	t.Helper()
	poll.UntilNil(t, "the listener to refuse connections after the shutdown began", func() error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return nil
		}
		c.Close()
		return errors.New("the listener still accepts")
	})
}

func TestShutdownTimeoutCutsStuckRequests(t *testing.T) {
	started := make(chan struct{})
	s, err := serve.Listen(serve.ServerConfig{Name: "api", Addr: "127.0.0.1:0", ShutdownTimeout: 50 * time.Millisecond,
		Handler: http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { close(started); <-r.Context().Done() })})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(s)
	got := make(chan error, 1)
	go func() { _, err := get("http://" + s.Addr().String() + "/"); got <- err }()
	<-started
	if err := stop(); err != nil {
		t.Fatalf("Serve = %v, want nil after cutting a stuck request", err)
	}
	if err := <-got; err == nil {
		t.Fatal("the stuck request was answered, want its connection cut")
	}
}

func TestListenErrorIsReturned(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	_, err = serve.Listen(serve.ServerConfig{Name: "data plane", Addr: taken.Addr().String()})
	if err == nil || !strings.Contains(err.Error(), "data plane: listening on "+taken.Addr().String()) {
		t.Fatalf("Listen on a taken port = %v", err)
	}
}

func TestServeErrorIsReturned(t *testing.T) {
	s, err := serve.Listen(serve.ServerConfig{Name: "api", Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close() // the listener fails under the server
	err = s.Serve(context.Background())
	if err == nil || !strings.Contains(err.Error(), "api: serving on") || errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Serve on a closed listener = %v", err)
	}
}

// TestDrainingResponsesCloseTheirConnection: while Draining says so, a
// response asks the client to close its connection, and the server closes
// it; before that the connection is kept alive for the next request.
func TestDrainingResponsesCloseTheirConnection(t *testing.T) {
	var draining atomic.Bool
	srv, err := serve.Listen(serve.ServerConfig{Name: "api", Addr: "127.0.0.1:0", Draining: draining.Load,
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	conn, err := net.Dial("tcp", srv.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	br := bufio.NewReader(conn)
	ask := func() *http.Response {
		t.Helper()
		if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp
	}
	if resp := ask(); resp.Close {
		t.Fatal("a response asked to close the connection before the drain")
	}
	draining.Store(true)
	if resp := ask(); !resp.Close {
		t.Fatal("a response while draining kept the connection alive")
	}
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("the server kept the connection open after a draining response: %v", err)
	}
}
