package oneshot

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
)

// BenchmarkExchange sends a small POST over a new loopback connection per
// request, as a relay carries one exchange, and reads the answer: with a
// one-shot net/http Transport (what the callers used before), and with
// RoundTrip.
//
//	go test -run XXX -bench Exchange -benchtime 2s ./src/oneshot/
func BenchmarkExchange(b *testing.B) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })
	addr := ln.Addr().String()
	var d net.Dialer
	const body = `{"accessToken":"0123456789abcdef0123456789abcdef","envVars":{"A":"1"}}`
	newRequest := func() *http.Request {
		req, err := http.NewRequest(http.MethodPost, "http://envd/init", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		return req
	}
	finish := func(resp *http.Response, err error) {
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNoContent {
			b.Fatalf("answer %d", resp.StatusCode)
		}
	}

	b.Run("transport", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			tr := &http.Transport{
				DialContext:       func(ctx context.Context, _, _ string) (net.Conn, error) { return d.DialContext(ctx, "tcp", addr) },
				DisableKeepAlives: true,
			}
			finish((&http.Client{Transport: tr}).Do(newRequest()))
			tr.CloseIdleConnections()
		}
	})
	b.Run("roundtrip", func(b *testing.B) {
		b.ReportAllocs()
		defer reportCPU(b)()
		for b.Loop() {
			conn, err := d.DialContext(context.Background(), "tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			finish(RoundTrip(newRequest(), conn))
		}
	})
}

// reportCPU reports the process's CPU time per op (user and system, the
// in-process server's share included) when the returned func runs: on a
// busy machine wall time per op measures the waiting as much as the work.
func reportCPU(b *testing.B) func() {
	before := cpuTime(b)
	return func() {
		b.ReportMetric(float64(cpuTime(b)-before)/float64(b.N), "cpu-ns/op")
	}
}

func cpuTime(b *testing.B) int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
