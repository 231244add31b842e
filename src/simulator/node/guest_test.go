package node_test

import (
	"io"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// closingHandler counts requests and records its Close.
type closingHandler struct {
	hits   atomic.Int64
	closed atomic.Bool
	info   node.SandboxInfo
}

func (h *closingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		h.hits.Add(1)
	}
	_, _ = io.WriteString(w, h.info.ID)
}

func (h *closingHandler) Close() error { h.closed.Store(true); return nil }

// The envd hook: built once per sandbox with the sandbox's identity and
// scratch dir, kept across hibernate, closed on release; HTTP/1.1 only.
func TestEnvdHandlerLifetime(t *testing.T) {
	var built atomic.Int64
	var last atomic.Pointer[closingHandler]
	cfg := testConfig()
	cfg.EnvdHandler = func(sb node.SandboxInfo) (http.Handler, error) {
		built.Add(1)
		h := &closingHandler{info: sb}
		last.Store(h)
		return h, nil
	}
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	own := root.As(cl.Token)

	get := func(h2 bool) error {
		tr := transportOver(own, cl.ID, sandboxd.EnvdPort, h2)
		defer tr.CloseIdleConnections()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://envd/health", nil)
		resp, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if string(body) != cl.ID {
			t.Fatalf("envd answered for %q", body)
		}
		return nil
	}
	if err := get(false); err != nil {
		t.Fatal(err)
	}
	h := last.Load()
	if h.info.ID != cl.ID || h.info.Token != cl.Token || h.info.ScratchDir == "" || !dirExists(h.info.ScratchDir) {
		t.Fatalf("handler got %+v", h.info)
	}
	if err := get(true); err == nil {
		t.Fatal("envd must not speak h2c")
	}
	if err := own.Hibernate(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	if err := get(false); err != nil { // wakes
		t.Fatal(err)
	}
	if built.Load() != 1 || h.hits.Load() != 2 {
		t.Fatalf("handler built %d times, hits %d", built.Load(), h.hits.Load())
	}
	if err := own.Release(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	if !h.closed.Load() {
		t.Fatal("release must close the envd handler")
	}
}
