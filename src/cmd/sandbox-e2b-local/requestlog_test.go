package main

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRequestLogEscapesClientInput sends paths that decode to a newline,
// a carriage return, ESC and other controls, over a raw connection so
// nothing client-side cleans them, and checks the log stays one line per
// request with no control character in it.
func TestRequestLogEscapesClientInput(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	h := requestLog(&buf, &mu)("api", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNotFound)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()

	paths := []string{
		"/x%0a12:00:00.000%20api%20GET%20/forged%20200%201ms%1b[2K",
		"/sandboxes/sb-abc%0d%0aforged",
		"/x%1b]0;title%07",
		"/x%c2%9b31m",    // C1 CSI
		"/x%e2%80%ae",    // right-to-left override
		"/x%e2%80%a8y",   // line separator
		"/x%ff%00y",      // invalid UTF-8 and NUL
		"/x%20y%22z%5cw", // space, quote, backslash
		"/v2/sandboxes",  // ordinary: logged as is
	}
	for _, p := range paths {
		conn, err := net.DialTimeout("tcp", strings.TrimPrefix(srv.URL, "http://"), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", p)
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		resp.Body.Close()
		conn.Close()
	}
	srv.Close() // every handler, and so every log line, has finished

	mu.Lock()
	out := buf.String()
	mu.Unlock()
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(paths) {
		t.Fatalf("%d requests logged %d lines:\n%s", len(paths), len(lines), out)
	}
	for i, line := range lines {
		if strings.ContainsFunc(line, func(r rune) bool {
			return r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || r == 0x202e || r == 0x2028
		}) {
			t.Errorf("line %d carries a control character: %q", i, line)
		}
		if f := strings.Fields(line); len(f) < 4 || f[1] != "api" || f[2] != "GET" {
			t.Errorf("line %d is not a request line: %q", i, line)
		}
	}
	if !strings.Contains(lines[0], `"/x\n12:00:00.000 api GET /forged`) || !strings.Contains(lines[0], `\x1b[2K"`) {
		t.Errorf("the forged line is not shown escaped: %q", lines[0])
	}
	if f := strings.Fields(lines[len(lines)-1]); f[3] != "/v2/sandboxes" {
		t.Errorf("an ordinary path is not logged as is: %q", lines[len(lines)-1])
	}
}
