package serve_test

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func listenOK(t *testing.T, cfg serve.ServerConfig) *serve.Server {
	t.Helper()
	cfg.Name, cfg.Addr = "bounds", "127.0.0.1:0"
	if cfg.Handler == nil {
		cfg.Handler = http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	}
	s, err := serve.Listen(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(s)
	t.Cleanup(func() { _ = stop() })
	return s
}

// answered sends one request on c and reports whether a response came.
func answered(c net.Conn) bool {
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		return false
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestConnectionsPerClientAreBounded: one client holding the bound's worth
// of connections gets its next one closed unread, while its open ones keep
// working, and the slot comes back when one closes.
func TestConnectionsPerClientAreBounded(t *testing.T) {
	const bound = 8
	s := listenOK(t, serve.ServerConfig{MaxConnsPerClient: bound})
	addr := s.Addr().String()
	var open []net.Conn
	t.Cleanup(func() {
		for _, c := range open {
			_ = c.Close()
		}
	})
	for range bound {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		open = append(open, c)
		if !answered(c) {
			t.Fatalf("connection %d within the bound was not served", len(open))
		}
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	if answered(extra) {
		t.Fatalf("connection %d past the bound of %d was served", bound+1, bound)
	}
	_ = extra.Close()
	if !answered(open[0]) {
		t.Fatal("an open connection stopped working when the bound was hit")
	}
	_ = open[0].Close()
	open = open[1:]
	// The closed connection's slot is given back once the server sees the
	// close.
	poll.UntilNil(t, "the slot freed by a closed connection to come back", func() error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if answered(c) {
			open = append(open, c)
			return nil
		}
		_ = c.Close()
		return errors.New("a new connection is still closed unread")
	})
}

// TestConnectionBoundOff: a negative bound turns it off.
func TestConnectionBoundOff(t *testing.T) {
	s := listenOK(t, serve.ServerConfig{MaxConnsPerClient: -1})
	for i := range 40 {
		c, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if !answered(c) {
			t.Fatalf("connection %d refused with the bound off", i)
		}
	}
}

// TestSlowHeadIsCut: a client that sends part of a request head and stops
// loses its connection after ReadHeaderTimeout.
func TestSlowHeadIsCut(t *testing.T) {
	s := listenOK(t, serve.ServerConfig{ReadHeaderTimeout: 200 * time.Millisecond})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = io.ReadAll(c)
	if err != nil {
		t.Fatalf("the server did not close the slow connection: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("the slow head was cut after %v", took)
	}
}

// TestOversizedHeadIsRefused: a request head past MaxHeaderBytes gets 431.
func TestOversizedHeadIsRefused(t *testing.T) {
	s := listenOK(t, serve.ServerConfig{MaxHeaderBytes: 4 << 10})
	c, err := net.Dial("tcp", s.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	head := "GET / HTTP/1.1\r\nHost: x\r\nX-Padding: " + strings.Repeat("a", 64<<10) + "\r\n\r\n"
	go func() { _, _ = io.WriteString(c, head) }()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("an oversized head answered %d, want 431", resp.StatusCode)
	}
}
