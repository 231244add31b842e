package sandboxd_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func TestAPIErrorMatchesSentinels(t *testing.T) {
	for status, sentinel := range map[int]error{
		400: sandboxd.ErrBadRequest, 401: sandboxd.ErrUnauthorized, 403: sandboxd.ErrForbidden,
		404: sandboxd.ErrNotFound, 409: sandboxd.ErrConflict, 412: sandboxd.ErrPrecondition, 426: sandboxd.ErrUpgradeRequired,
		429: sandboxd.ErrCapacity, 502: sandboxd.ErrGuestUnreachable, 503: sandboxd.ErrUnavailable,
	} {
		err := fmt.Errorf("wrapped: %w", &sandboxd.APIError{Status: status, Message: "m"})
		if !errors.Is(err, sentinel) || sandboxd.StatusOf(err) != status {
			t.Errorf("%d does not match %v", status, sentinel)
		}
		if errors.Is(err, sandboxd.ErrNotFound) && status != 404 {
			t.Errorf("%d must not match ErrNotFound", status)
		}
	}
	if errors.Is(&sandboxd.APIError{Status: 500}, sandboxd.ErrCapacity) || sandboxd.StatusOf(errors.New("x")) != 0 {
		t.Fatal("500 matches no sentinel; plain errors carry no status")
	}
}

func TestNewRejectsBadAddresses(t *testing.T) {
	for _, addr := range []string{"", "ftp://host:1", "http://"} {
		if _, err := sandboxd.New(addr); err == nil {
			t.Errorf("New(%q) must fail", addr)
		}
	}
	for _, addr := range []string{"127.0.0.1:7777", "http://10.0.0.5:7777", "https://node.example:8443/"} {
		c, err := sandboxd.New(addr)
		if err != nil || c.Addr() != addr {
			t.Errorf("New(%q) = %v", addr, err)
		}
	}
}

// A node that answers more than the client reads is an error, not a
// truncated decode.
func TestResponseBodiesAreBounded(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch r.URL.Path {
		case "/v1/sandboxes":
			_, _ = io.WriteString(w, `{"sandboxes":[`+strings.Repeat(`{"id":"sb_x"},`, 20000)+`{"id":"sb_y"}]}`)
		case "/v1/info":
			w.WriteHeader(http.StatusTeapot)
			_, _ = io.WriteString(w, "plain text failure "+strings.Repeat("x", 1000))
		}
	}))
	defer srv.Close()
	c, _ := sandboxd.New(strings.TrimPrefix(srv.URL, "http://"), sandboxd.WithToken("tok"), sandboxd.WithMaxResponseBytes(64<<10))
	if _, err := c.Sandboxes(ctxT(t), ""); !errors.Is(err, sandboxd.ErrResponseTooLarge) {
		t.Fatalf("oversized body: %v", err)
	}
	big, _ := sandboxd.New(strings.TrimPrefix(srv.URL, "http://"), sandboxd.WithToken("tok"))
	rows, err := big.Sandboxes(ctxT(t), "")
	if err != nil || len(rows) != 20001 {
		t.Fatalf("default cap reads %d rows: %v", len(rows), err)
	}
	_, err = big.Info(ctxT(t))
	var apiErr *sandboxd.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusTeapot || len(apiErr.Message) > 256 || !strings.HasPrefix(apiErr.Message, "plain text failure") {
		t.Fatalf("non-JSON error body: %#v", err)
	}
	if strings.Contains(err.Error(), "tok") {
		t.Fatal("errors must not carry the token")
	}
}

func TestCallsHonourContextDeadlines(t *testing.T) {
	f, err := simfleet.Start(context.Background(), simfleet.Config{RootToken: "root", ColdProvisionDelay: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c, _ := sandboxd.New(f.Node(0).Addr(), sandboxd.WithToken("root"))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	// An unpooled key cold-boots for an hour; the deadline ends the call.
	_, err = c.Claim(ctx, sandboxd.ClaimRequest{Template: "cold:1"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want deadline exceeded, got %v", err)
	}
}

// rawUpgradeServer accepts one connection and answers it with reply,
// written in a single segment.
func rawUpgradeServer(t *testing.T, reply string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		req, err := http.ReadRequest(bufio.NewReader(conn))
		if err != nil || req.Header.Get("Upgrade") != "tcp" || req.Header.Get("Authorization") != "Bearer sbtok" ||
			req.URL.Path != "/v1/sandboxes/sb_1/ports/8080" {
			_, _ = io.WriteString(conn, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")
			return
		}
		if reply == "" {
			_, _ = io.Copy(io.Discard, conn) // never answers; ends when the client hangs up
			return
		}
		_, _ = io.WriteString(conn, reply)
		_, _ = io.Copy(io.Discard, conn)
	}()
	return ln.Addr().String()
}

func TestDialPortKeepsBytesBufferedWithThe101(t *testing.T) {
	addr := rawUpgradeServer(t, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\nguest-spoke-first")
	c, _ := sandboxd.New(addr, sandboxd.WithToken("sbtok"))
	conn, err := c.DialPort(ctxT(t), "sb_1", 8080)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, len("guest-spoke-first"))
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "guest-spoke-first" {
		t.Fatalf("bytes behind the 101: %q %v", buf, err)
	}
}

func TestDialPortRefusals(t *testing.T) {
	addr := rawUpgradeServer(t, "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\nContent-Length: 31\r\n\r\n{\"error\": \"guest unreachable\"}\n")
	c, _ := sandboxd.New(addr, sandboxd.WithToken("sbtok"))
	_, err := c.DialPort(ctxT(t), "sb_1", 8080)
	var apiErr *sandboxd.APIError
	if !errors.Is(err, sandboxd.ErrGuestUnreachable) || !errors.As(err, &apiErr) || apiErr.Message != "guest unreachable" {
		t.Fatalf("502: %v", err)
	}

	addr = rawUpgradeServer(t, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
	c, _ = sandboxd.New(addr, sandboxd.WithToken("sbtok"))
	if _, err := c.DialPort(ctxT(t), "sb_1", 8080); err == nil || !strings.Contains(err.Error(), "not tcp") {
		t.Fatalf("101 to another protocol: %v", err)
	}

	addr = rawUpgradeServer(t, "")
	c, _ = sandboxd.New(addr, sandboxd.WithToken("sbtok"))
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := c.DialPort(ctx, "sb_1", 8080); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent node: %v", err)
	}
}

func TestDialPortBoundsTheAnswerHead(t *testing.T) {
	huge := "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: tcp\r\nX-Padding: " +
		strings.Repeat("a", 100<<10) + "\r\n\r\n"
	addr := rawUpgradeServer(t, huge)
	c, _ := sandboxd.New(addr, sandboxd.WithToken("sbtok"))
	if _, err := c.DialPort(ctxT(t), "sb_1", 8080); !errors.Is(err, sandboxd.ErrResponseTooLarge) {
		t.Fatalf("a 101 whose head is 100 KiB: %v, want ErrResponseTooLarge", err)
	}
}
