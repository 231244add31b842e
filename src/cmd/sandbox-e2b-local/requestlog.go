package main

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// requestLog writes one readable line per request to w: time, listener,
// method, path (never the query: signed file URLs carry signatures
// there), status and duration. Headers are never logged, so neither are
// API keys nor access tokens.
func requestLog(w io.Writer, mu *sync.Mutex) func(name string, h http.Handler) http.Handler {
	return func(name string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &serve.Recorder{ResponseWriter: rw}
			defer func() {
				status := cmp.Or(rec.Status, http.StatusOK) // 0: the handler wrote nothing
				mu.Lock()
				fmt.Fprintf(w, "%s %-10s %-6s %s %d %s\n", start.Format("15:04:05.000"), name, r.Method, r.URL.Path, status, time.Since(start).Round(10*time.Microsecond))
				mu.Unlock()
			}()
			h.ServeHTTP(rec, r)
		})
	}
}
