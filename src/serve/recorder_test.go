package serve_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

func TestRecorderNotesTheFinalStatusAndSize(t *testing.T) {
	for name, tc := range map[string]struct {
		handle func(http.ResponseWriter)
		status int
		bytes  int64
	}{
		"implicit 200":      {func(w http.ResponseWriter) { _, _ = io.WriteString(w, "hello") }, 200, 5},
		"explicit status":   {func(w http.ResponseWriter) { w.WriteHeader(404); _, _ = io.WriteString(w, "no") }, 404, 2},
		"interim 1xx first": {func(w http.ResponseWriter) { w.WriteHeader(103); w.WriteHeader(201) }, 201, 0},
		"nothing written":   {func(http.ResponseWriter) {}, 0, 0},
	} {
		rec := &serve.Recorder{ResponseWriter: httptest.NewRecorder()}
		tc.handle(rec)
		if rec.Status != tc.status || rec.Bytes != tc.bytes {
			t.Errorf("%s: recorded %d and %d bytes, want %d and %d", name, rec.Status, rec.Bytes, tc.status, tc.bytes)
		}
	}
}

func TestRecorderKeepsFlushAndHijackReachable(t *testing.T) {
	var rec *serve.Recorder
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec = &serve.Recorder{ResponseWriter: w}
		if r.Header.Get("Upgrade") == "" {
			_, _ = io.WriteString(rec, "streamed")
			if err := http.NewResponseController(rec).Flush(); err != nil {
				t.Errorf("flush through the recorder: %v", err)
			}
			return
		}
		conn, brw, err := http.NewResponseController(rec).Hijack()
		if err != nil {
			t.Errorf("hijack through the recorder: %v", err)
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
		_ = brw.Flush()
	}))
	defer srv.Close()

	if _, err := http.Get(srv.URL); err != nil || rec.Status != 200 || rec.Bytes != 8 {
		t.Fatalf("streamed answer: %v, recorded %d and %d bytes", err, rec.Status, rec.Bytes)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: echo\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil || resp.StatusCode != http.StatusSwitchingProtocols || rec.Status != http.StatusSwitchingProtocols {
		t.Fatalf("upgrade: %v, answered %v, recorded %d", err, resp, rec.Status)
	}
}
