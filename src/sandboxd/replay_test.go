package sandboxd_test

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// closingNode answers the first request on each connection and keeps the
// connection alive; the second request on a connection finds it closed
// (reset) after the request was sent, as a node that closes an idle
// connection at the moment a client reuses it does. It counts requests
// it answered.
func closingNode(t *testing.T) (addr string, answered *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	answered = &atomic.Int32{}
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				br := bufio.NewReader(conn)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, req.Body)
				answered.Add(1)
				_, _ = io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}")
				if _, err := http.ReadRequest(br); err != nil {
					return
				}
				// Reset, not a clean close: nothing of an answer is sent.
				_ = conn.(*net.TCPConn).SetLinger(0)
			}()
		}
	}()
	return ln.Addr().String(), answered
}

func TestIdempotentCallsSurviveAConnectionClosedUnderThem(t *testing.T) {
	addr, answered := closingNode(t)
	c, err := sandboxd.New(addr, sandboxd.WithToken("root"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The first call opens the connection the second one reuses.
	if err := c.Release(ctx, "sb_0000000000000000000a"); err != nil {
		t.Fatalf("first release: %v", err)
	}
	for name, call := range map[string]func() error{
		"release":   func() error { return c.Release(ctx, "sb_0000000000000000000b") },
		"hibernate": func() error { return c.Hibernate(ctx, "sb_0000000000000000000c") },
		"wake":      func() error { return c.Wake(ctx, "sb_0000000000000000000d") },
	} {
		before := answered.Load()
		if err := call(); err != nil {
			t.Errorf("%s on a connection reset under it: %v, want it sent again on a new one", name, err)
		}
		if answered.Load() != before+1 {
			t.Errorf("%s: the node answered %d requests, want 1", name, answered.Load()-before)
		}
	}
	// A claim is not sent again: the node may have granted it. The last
	// call left a connection that answered once; the claim reuses it, the
	// node resets it, and the claim fails without a second request.
	before := answered.Load()
	if _, err := c.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: "base", NoRedirect: true}); err == nil {
		t.Error("a claim on a connection reset under it succeeded")
	}
	if answered.Load() != before {
		t.Errorf("a claim on a connection reset under it was sent again (%d answered)", answered.Load()-before)
	}
}
