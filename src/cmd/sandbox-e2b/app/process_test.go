package app_test

import (
	"context"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b/app"
	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

func config(t *testing.T) app.Config {
	t.Helper()
	f, err := simfleet.Start(context.Background(), simfleet.Config{Nodes: 2, RootToken: "root"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return app.Config{
		E2B:        e2b.Config{Domain: "sandbox.test", EnvdSecret: []byte("secret"), AllowAnonymous: true},
		APIAddress: "127.0.0.1:0", ProxyAddress: "127.0.0.1:0",
		Seeds: f.Addrs()[:1], Token: "root", RefreshInterval: time.Second, NodeTimeout: 5 * time.Second,
	}
}

func status(t *testing.T, url string) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

func TestStartServesBothListenersUntilTheContextEnds(t *testing.T) {
	cfg := config(t)
	cfg.MetricsAddress = "127.0.0.1:0"
	var mu sync.Mutex
	wrapped := map[string]int{}
	cfg.Wrap = func(name string, h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			wrapped[name]++
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	}
	p, err := app.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	if got := status(t, "http://"+p.APIAddr().String()+"/health"); got != http.StatusOK {
		t.Errorf("e2b surface /health = %d", got)
	}
	if got := status(t, "http://"+p.ProxyAddr().String()+"/healthz"); got != http.StatusOK {
		t.Errorf("data plane /healthz = %d", got)
	}
	if got := status(t, "http://"+p.MetricsAddr().String()+"/metrics"); got != http.StatusOK {
		t.Errorf("metrics listener /metrics = %d", got)
	}
	mu.Lock()
	if wrapped["api"] != 1 || wrapped["data-plane"] != 1 {
		t.Errorf("Wrap saw %v, want one request on each listener", wrapped)
	}
	mu.Unlock()

	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v after its context ended", err)
	}
	if _, err := http.Get("http://" + p.APIAddr().String() + "/health"); err == nil {
		t.Fatal("the e2b surface still serves after Run returned")
	}
}

func TestTakenPortFailsStartup(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := config(t)
	cfg.ProxyAddress = taken.Addr().String()
	if _, err := app.Start(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "data-plane: listening on") {
		t.Fatalf("Start with the data plane's port taken = %v", err)
	}
	cfg = config(t)
	cfg.APIAddress = taken.Addr().String()
	cfg.ProxyAddress = ""
	if _, err := app.Start(context.Background(), cfg, nil); err == nil || !strings.Contains(err.Error(), "api: listening on") {
		t.Fatalf("Start with the API's port taken = %v", err)
	}
}

func TestNoDataPlaneWithoutAnAddress(t *testing.T) {
	cfg := config(t)
	cfg.ProxyAddress = ""
	p, err := app.Start(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if p.ProxyAddr() != nil {
		t.Fatalf("a data plane on %v without ProxyAddress", p.ProxyAddr())
	}
	if p.MetricsAddr() != nil {
		t.Fatalf("a metrics listener on %v without MetricsAddress", p.MetricsAddr())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := p.Run(ctx); err != nil {
		t.Fatal(err)
	}
}
