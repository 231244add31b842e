package echo

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
)

// MaxBody bounds the request body the HTTP echo reads; larger bodies are
// answered 413.
const MaxBody = 1 << 20

// Request is the JSON document the HTTP echo answers with.
type Request struct {
	// Sandbox and Port say which guest answered.
	Sandbox   string              `json:"sandbox,omitempty"`
	Port      int                 `json:"port,omitempty"`
	Proto     string              `json:"proto"`
	Method    string              `json:"method"`
	Host      string              `json:"host"`
	Path      string              `json:"path"`
	RawQuery  string              `json:"raw_query,omitempty"`
	Query     map[string][]string `json:"query,omitempty"`
	Headers   map[string][]string `json:"headers"`
	Body      string              `json:"body"`
	BodyBytes int                 `json:"body_bytes"`
}

// Handler returns the HTTP echo for the guest of sandbox on port.
func Handler(sandbox string, port int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, "request body too large", http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "read body", http.StatusBadRequest)
			return
		}
		doc := Request{
			Sandbox:   sandbox,
			Port:      port,
			Proto:     r.Proto,
			Method:    r.Method,
			Host:      r.Host,
			Path:      r.URL.Path,
			RawQuery:  r.URL.RawQuery,
			Headers:   r.Header,
			Body:      string(body),
			BodyBytes: len(body),
		}
		if q := r.URL.Query(); len(q) > 0 {
			doc.Query = q
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(doc)
	})
}
