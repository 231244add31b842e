package echo_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/echo"
)

func TestHandlerReportsTheRequest(t *testing.T) {
	h := echo.Handler("sb_1", 8080)
	req := httptest.NewRequest(http.MethodPut, "http://guest.local/a/b?x=1&x=2", strings.NewReader("body!"))
	req.Header.Set("X-Thing", "v")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var doc echo.Request
	if err := json.Unmarshal(rec.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if rec.Code != 200 || doc.Method != "PUT" || doc.Path != "/a/b" || doc.RawQuery != "x=1&x=2" ||
		len(doc.Query["x"]) != 2 || doc.Headers["X-Thing"][0] != "v" || doc.Body != "body!" ||
		doc.BodyBytes != 5 || doc.Sandbox != "sb_1" || doc.Port != 8080 || doc.Host != "guest.local" {
		t.Fatalf("echo = %d %+v", rec.Code, doc)
	}

	big := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(strings.Repeat("x", echo.MaxBody+1)))
	rec = httptest.NewRecorder()
	h.ServeHTTP(rec, big)
	if rec.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("oversized body: %d", rec.Code)
	}
}

func TestServeStreamEchoesUntilHalfClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err == nil {
			echo.ServeStream(c)
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := io.WriteString(c, "round trip"); err != nil {
		t.Fatal(err)
	}
	_ = c.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "round trip" {
		t.Fatalf("stream echo: %q %v", got, err)
	}
}
