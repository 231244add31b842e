package e2b_test

import (
	"net/http"
	"strings"
	"testing"
)

// The SDK operations the surface does not serve answer with their reason,
// behind the same key check as every other call.
func TestUnsupportedOperationsSayWhy(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, c := range []struct {
		method, path string
		want         int
		reason       string
	}{
		{http.MethodPut, "/sandboxes/sb-0000/network", http.StatusBadRequest, "allow-list"},
		{http.MethodGet, "/sandboxes/sb-0000/logs", http.StatusNotImplemented, "logs"},
		{http.MethodGet, "/v2/sandboxes/sb-0000/logs", http.StatusNotImplemented, "logs"},
		{http.MethodGet, "/secrets", http.StatusNotImplemented, "secret"},
		{http.MethodDelete, "/secrets/s1", http.StatusNotImplemented, "secret"},
		{http.MethodGet, "/teams", http.StatusNotImplemented, "namespace"},
		{http.MethodGet, "/teams/t1/metrics/max", http.StatusNotImplemented, "namespace"},
		{http.MethodPost, "/volumes", http.StatusBadRequest, "catalog"},
		{http.MethodDelete, "/volumes/v1", http.StatusBadRequest, "catalog"},
		{http.MethodGet, "/volumes/v1", http.StatusNotImplemented, "catalog"},
	} {
		t.Run(c.method+" "+c.path, func(t *testing.T) {
			if r := e.do(t, c.method, c.path, "", nil); r.status != http.StatusUnauthorized {
				t.Errorf("without a key = %d, want 401", r.status)
			}
			r := e.do(t, c.method, c.path, keyA, map[string]any{})
			if r.status != c.want {
				t.Fatalf("= %d %s, want %d", r.status, r.body, c.want)
			}
			if msg := r.errorMessage(t); !strings.Contains(msg, c.reason) || strings.Contains(msg, "no such endpoint") {
				t.Errorf("message %q does not give the reason (%q)", msg, c.reason)
			}
		})
	}
}

// GET /sandboxes/metrics answers the caller's sandboxes among the ids,
// in either list form, and leaves out anything else without saying why.
func TestBatchMetrics(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.create(t, keyA, nil)
	b := e.create(t, keyA, nil)
	theirs := e.create(t, keyB, nil)
	var got struct {
		Sandboxes map[string]struct {
			CPUCount int   `json:"cpuCount"`
			MemTotal int64 `json:"memTotal"`
		} `json:"sandboxes"`
	}
	r := e.do(t, http.MethodGet, "/sandboxes/metrics?sandbox_ids="+a.SandboxID+","+theirs.SandboxID+"&sandbox_ids="+b.SandboxID+"&sandbox_ids=sb-00000000000000000000", keyA, nil)
	if r.status != http.StatusOK {
		t.Fatalf("= %d %s", r.status, r.body)
	}
	r.decode(t, &got)
	if len(got.Sandboxes) != 2 || got.Sandboxes[a.SandboxID].CPUCount < 1 || got.Sandboxes[b.SandboxID].MemTotal <= 0 {
		t.Fatalf("metrics of %v, want exactly the caller's two with their readings", got.Sandboxes)
	}
	if r := e.do(t, http.MethodGet, "/sandboxes/metrics", keyA, nil); r.status != http.StatusBadRequest {
		t.Errorf("without sandbox_ids = %d, want 400", r.status)
	}
}
