package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// requestLog writes one readable line per request to w: time, listener,
// method, path (never the query: signed file URLs carry signatures
// there), status and duration. Headers are never logged, so neither are
// API keys nor access tokens.
func requestLog(w io.Writer, mu *sync.Mutex) func(name string, h http.Handler) http.Handler {
	return func(name string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &statusRecorder{ResponseWriter: rw}
			defer func() {
				status := rec.status
				if status == 0 {
					status = http.StatusOK
				}
				mu.Lock()
				fmt.Fprintf(w, "%s %-10s %-6s %s %d %s\n", start.Format("15:04:05.000"), name, r.Method, r.URL.Path, status, time.Since(start).Round(10*time.Microsecond))
				mu.Unlock()
			}()
			h.ServeHTTP(rec, r)
		})
	}
}

// statusRecorder remembers the status code and keeps the writer's
// optional interfaces (flush for streamed RPCs, hijack for upgrades)
// reachable.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (s *statusRecorder) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusRecorder) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusRecorder) Flush() {
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusRecorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if s.status == 0 {
		s.status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(s.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }
