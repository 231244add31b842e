package node_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/echo"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

const (
	rootToken   = "root-token-for-tests"
	tenantA     = "tenant-a-token"
	tenantB     = "tenant-b-token"
	unknownTok  = "not-a-configured-token"
	tmpl        = "base:24.04"
	echoPort    = 8080
	waitTimeout = 30 * time.Second
)

var baseKey = sandbox.PoolKey{Template: tmpl, Net: "none", Size: "small"}

// newFakeClock is an injectable node clock for lease tests.
func newFakeClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 7, 6, 0, 0, 0, 0, time.UTC))
}

// testConfig is a node with a root token, two tenants, a warm pool of
// four and an HTTP echo guest on 8080.
func testConfig() node.Config {
	return node.Config{
		Name:      "test-node",
		RootToken: rootToken,
		Tenants: []node.Tenant{
			{Name: "team-a", Token: tenantA, MaxClaims: 3},
			{Name: "team-b", Token: tenantB},
		},
		Pools: []sandboxd.PoolSpec{{Template: tmpl, Warm: 4}},
		Guests: []node.Guest{{
			Port: echoPort, H2C: true,
			HTTP: func(sb node.SandboxInfo) (http.Handler, error) { return echo.Handler(sb.ID, echoPort), nil },
		}},
	}
}

// startNode starts a node, waits for its initial pools to be warm and
// closes it when the test ends.
func startNode(t testing.TB, cfg node.Config) *node.Node {
	t.Helper()
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	for _, p := range cfg.Pools {
		waitWarm(t, n, p.Key(), p.Warm)
	}
	return n
}

func waitWarm(t testing.TB, n *node.Node, key sandbox.PoolKey, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := n.WaitWarm(ctx, key, want); err != nil {
		t.Fatalf("pool %s never reached %d warm (have %d): %v", key, want, n.WarmCount(key), err)
	}
}

func client(t testing.TB, n *node.Node, token string) *sandboxd.Client {
	t.Helper()
	c, err := sandboxd.New(n.Addr(), sandboxd.WithToken(token))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	return c
}

func ctxT(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	t.Cleanup(cancel)
	return ctx
}

// wantStatus asserts err is an *APIError with status (and so matches the
// sentinel of that status).
func wantStatus(t testing.TB, err error, status int, sentinel error) {
	t.Helper()
	if err == nil {
		t.Fatalf("want %d, got success", status)
	}
	if got := sandboxd.StatusOf(err); got != status {
		t.Fatalf("want status %d, got %d (%v)", status, got, err)
	}
	if sentinel != nil && !errors.Is(err, sentinel) {
		t.Fatalf("error %v does not match %v", err, sentinel)
	}
	var apiErr *sandboxd.APIError
	if errors.As(err, &apiErr) && apiErr.Message == "" {
		t.Fatalf("status %d carries no {\"error\"} message", status)
	}
}

// rawClient does not keep connections, so tests leave none behind.
var rawClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

// rawDo sends a request the typed client cannot express and returns the
// status and body.
func rawDo(t testing.TB, method, url, token string, body []byte, hdr map[string]string) (int, string) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctxT(t), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := rawClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b)
}

func dirExists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}
