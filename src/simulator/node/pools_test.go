package node_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func TestPutPoolsReplacesTheSet(t *testing.T) {
	cfg := testConfig()
	cfg.RefillDelay = time.Millisecond
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	held, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})

	other := sandbox.PoolKey{Template: "py:3.12", Net: "none", Size: "medium"}
	info, err := root.SetPools(ctx, []sandboxd.PoolSpec{{Template: "py:3.12", Size: "medium", Warm: 3, WarmMax: 5}})
	if err != nil {
		t.Fatalf("set pools: %v", err)
	}
	// The answer is the info payload: the omitted pool is gone, the new
	// one is there (still filling), the live claim untouched.
	if _, ok := info.Pool(baseKey); ok {
		t.Fatalf("omitted pool must drain: %+v", info.Pools)
	}
	if p, ok := info.Pool(other); !ok || p.Target != 3 {
		t.Fatalf("new pool missing: %+v", info.Pools)
	}
	if info.Claimed != 1 {
		t.Fatalf("claimed = %d", info.Claimed)
	}
	waitWarm(t, n, other, 3)
	info, _ = root.Info(ctx)
	if p, _ := info.Pool(other); p.Warm != 3 || !p.Golden || p.Refilling != 0 {
		t.Fatalf("filled pool = %+v", p)
	}
	if err := root.As(held.Token).Release(ctx, held.ID); err != nil {
		t.Fatalf("claim from a drained pool must still release: %v", err)
	}

	// Scale down, then an unchanged apply is idempotent.
	for range 2 {
		info, err = root.SetPools(ctx, []sandboxd.PoolSpec{{Template: "py:3.12", Size: "medium", Warm: 1}})
		if err != nil {
			t.Fatal(err)
		}
		if p, _ := info.Pool(other); p.Warm != 1 || p.Target != 1 {
			t.Fatalf("scaled-down pool = %+v", p)
		}
	}

	for name, specs := range map[string][]sandboxd.PoolSpec{
		"empty template":    {{Warm: 1}},
		"negative warm":     {{Template: tmpl, Warm: -1}},
		"warm_max < warm":   {{Template: tmpl, Warm: 4, WarmMax: 2}},
		"negative idle":     {{Template: tmpl, Warm: 1, IdleHibernateSeconds: -5}},
		"duplicate":         {{Template: tmpl, Warm: 1}, {Template: tmpl, Net: "none", Size: "small", Warm: 2}},
		"unknown size tier": {{Template: tmpl, Size: "huge", Warm: 1}},
	} {
		_, err := root.SetPools(ctx, specs)
		if sandboxd.StatusOf(err) != http.StatusBadRequest {
			t.Errorf("%s: want 400, got %v", name, err)
		}
	}
	_, err = root.SetPools(ctx, []sandboxd.PoolSpec{{Template: tmpl, Net: "egress", Warm: 1}})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	url := "http://" + n.Addr() + "/v1/pools"
	if code, _ := rawDo(t, http.MethodPut, url, rootToken, []byte(`{"pools":[{"template":"x","warm":1,"warmup":["true"]}]}`), nil); code != 400 {
		t.Fatalf("config-owned warmup field: %d", code)
	}
	_, err = client(t, n, tenantA).SetPools(ctx, nil)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	_, err = client(t, n, unknownTok).SetPools(ctx, nil)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)

	// An empty set drains everything.
	info, err = root.SetPools(ctx, nil)
	if err != nil || len(info.Pools) != 0 {
		t.Fatalf("empty set: %+v %v", info, err)
	}
}

func TestDrainAndUndrain(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	live, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})

	info, err := root.Drain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := info.Pool(baseKey); !info.Draining || p.Warm != 0 || p.Target != 4 || info.Claimed != 1 {
		t.Fatalf("drained info = %+v", info)
	}
	_, err = root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)
	if !strings.Contains(err.Error(), "draining") {
		t.Fatalf("429 must say the node drains: %v", err)
	}
	// Live claims keep serving.
	if _, err := root.As(live.Token).Renew(ctx, live.ID, 60); err != nil {
		t.Fatalf("renew while draining: %v", err)
	}
	_, err = client(t, n, tenantA).Drain(ctx)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	_, err = client(t, n, tenantA).Undrain(ctx)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	_, err = client(t, n, "").Drain(ctx)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)

	info, err = root.Undrain(ctx)
	if err != nil || info.Draining {
		t.Fatalf("undrain: %+v %v", info, err)
	}
	waitWarm(t, n, baseKey, 4)
	if _, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatalf("claim after undrain: %v", err)
	}
}

func TestInfoPeersMetricsHealthAuth(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	if _, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatal(err)
	}

	info, err := root.Info(ctx)
	if err != nil || info.Claimed != 1 || len(info.Peers) != 0 {
		t.Fatalf("info = %+v %v", info, err)
	}
	_, err = client(t, n, tenantA).Info(ctx)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	_, err = client(t, n, unknownTok).Info(ctx)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)

	// Peers: topology, so a tenant may read it; a mesh of one has none.
	for _, tok := range []string{rootToken, tenantA} {
		peers, err := client(t, n, tok).Peers(ctx)
		if err != nil || len(peers) != 0 {
			t.Fatalf("peers = %v %v", peers, err)
		}
	}
	_, err = client(t, n, "").Peers(ctx)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)

	m, err := root.Metrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`sandboxd_pool_warm{template="base:24.04",net="none",size="small"} `,
		`sandboxd_pool_target{template="base:24.04",net="none",size="small"} 4`,
		"sandboxd_claimed 1",
		`sandboxd_claims_total{tier="warm"} 1`,
		`sandboxd_tenant_claims{tenant="team-a"} 0`,
		"# TYPE sandboxd_sim_sandbox_gets_total counter",
		"sandboxd_sim_owner_lookups_total 0",
	} {
		if !strings.Contains(m, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	_, err = client(t, n, tenantA).Metrics(ctx)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	_, err = client(t, n, "").Metrics(ctx)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)

	if err := client(t, n, "").Healthz(ctx); err != nil {
		t.Fatalf("healthz is unauthenticated: %v", err)
	}
	// An unknown route is the router's plain 404, not an API error, so a
	// client tells a missing verb from a missing sandbox.
	if code, body := rawDo(t, http.MethodGet, "http://"+n.Addr()+"/v1/nope", rootToken, nil, nil); code != 404 || strings.Contains(body, `"error"`) {
		t.Fatalf("unknown route: %d %s", code, body)
	}
	// Sandbox listings are a node-token surface.
	_, err = client(t, n, "").Sandboxes(ctx, "")
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
}

// A node configured without a verb answers it as an older sandboxd would:
// the client reads sandboxd.ErrUnsupported, never ErrNotFound.
func TestVerbTheNodeLacksIsUnsupported(t *testing.T) {
	cfg := testConfig()
	cfg.Without = []string{"GET /v1/volumes"}
	n := startNode(t, cfg)
	_, err := client(t, n, rootToken).Volumes(context.Background())
	if !errors.Is(err, sandboxd.ErrUnsupported) || errors.Is(err, sandboxd.ErrNotFound) {
		t.Fatalf("a verb the node lacks = %v, want ErrUnsupported and not ErrNotFound", err)
	}
	if _, err := client(t, n, rootToken).Sandbox(context.Background(), "sb_00000000000000000000"); !errors.Is(err, sandboxd.ErrNotFound) || errors.Is(err, sandboxd.ErrUnsupported) {
		t.Fatalf("an unknown sandbox = %v, want ErrNotFound", err)
	}
}
