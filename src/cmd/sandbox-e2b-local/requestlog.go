package main

import (
	"cmp"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// requestLog writes one readable line per request to w: time, listener,
// method, path (never the query: signed file URLs carry signatures
// there), status and duration. Headers are never logged, so neither are
// API keys nor access tokens. The method and path are the client's: each
// goes through logField, so no request can end the line early, forge
// another, or send the terminal an escape sequence.
func requestLog(w io.Writer, mu *sync.Mutex) func(name string, h http.Handler) http.Handler {
	return func(name string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
			start := time.Now()
			rec := &serve.Recorder{ResponseWriter: rw}
			defer func() {
				status := cmp.Or(rec.Status, http.StatusOK) // 0: the handler wrote nothing
				mu.Lock()
				fmt.Fprintf(w, "%s %-10s %-6s %s %d %s\n", start.Format("15:04:05.000"), name, logField(r.Method), logField(r.URL.Path), status, time.Since(start).Round(10*time.Microsecond))
				mu.Unlock()
			}()
			h.ServeHTTP(rec, r)
		})
	}
}

// logField is s as one field of a request line: unchanged when it is
// printable without spaces or quotes, which every ordinary path is, and
// otherwise Go-quoted, so a control character (a newline, ESC, a C1
// control), a bidi override, a space or invalid UTF-8 shows as an escape
// and the quotes say the field was escaped.
func logField(s string) string {
	if s == "" {
		return `""`
	}
	plain := !strings.ContainsFunc(s, func(r rune) bool {
		return r == ' ' || r == '"' || r == '\\' || r == utf8.RuneError || !unicode.IsPrint(r)
	})
	if plain && utf8.ValidString(s) {
		return s
	}
	return strconv.Quote(s)
}
