package node_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestWarmClaimGrantsFreshSandbox(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	n := startNode(t, cfg)
	root := client(t, n, rootToken)
	ctx := ctxT(t)

	a, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "ns/a"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	b, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Net: "none", Size: "small"})
	if err != nil {
		t.Fatalf("second claim: %v", err)
	}
	if !strings.HasPrefix(a.ID, "sb_") || a.ID == b.ID || a.Token == "" || a.Token == b.Token {
		t.Fatalf("claims must carry distinct sb_ ids and tokens: %+v %+v", a, b)
	}
	if a.OwnerAddr != n.Addr() {
		t.Fatalf("owner_addr = %q, want %q", a.OwnerAddr, n.Addr())
	}
	if want := clock.Now().Add(300 * time.Second); !a.Deadline.Equal(want) {
		t.Fatalf("default lease: deadline %v, want %v", a.Deadline, want)
	}
	if c := n.Counters(); c.ClaimsWarm != 2 || c.ClaimsCold != 0 {
		t.Fatalf("both claims must be warm hits: %+v", c)
	}

	// The index echoes claim_ref and claimed_at; ?claim_ref= filters.
	rows, err := root.Sandboxes(ctx, "ns/a")
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].ID != a.ID || rows[0].ClaimRef != "ns/a" || rows[0].Key != baseKey ||
		rows[0].ClaimedAt == nil || !rows[0].ClaimedAt.Equal(clock.Now()) || rows[0].Token != "" {
		t.Fatalf("claim_ref row = %+v", rows)
	}
	all, err := root.Sandboxes(ctx, "")
	if err != nil || len(all) != 2 {
		t.Fatalf("full index = %v, %v", all, err)
	}
}

func TestClaimLeaseClampAndBadRequests(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	n := startNode(t, cfg)
	root := client(t, n, rootToken)
	ctx := ctxT(t)

	long, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 7 * 24 * 3600})
	if err != nil {
		t.Fatal(err)
	}
	if want := clock.Now().Add(24 * time.Hour); !long.Deadline.Equal(want) {
		t.Fatalf("lease must clamp to 24h: %v want %v", long.Deadline, want)
	}
	short, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 42})
	if err != nil || !short.Deadline.Equal(clock.Now().Add(42*time.Second)) {
		t.Fatalf("explicit lease: %+v %v", short, err)
	}

	for name, req := range map[string]sandboxd.ClaimRequest{
		"no template":  {},
		"unknown size": {Template: tmpl, Size: "galactic"},
		"unknown net":  {Template: tmpl, Net: "bridge-x"},
		"negative ttl": {Template: tmpl, TTLSeconds: -1},
	} {
		_, err := root.Claim(ctx, req)
		if sandboxd.StatusOf(err) != http.StatusBadRequest {
			t.Errorf("%s: want 400, got %v", name, err)
		}
	}
	_, err = root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Net: "egress"})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)

	url := "http://" + n.Addr() + "/v1/claim"
	if code, body := rawDo(t, http.MethodPost, url, rootToken, []byte("{not json"), nil); code != 400 || !strings.Contains(body, `"error"`) {
		t.Fatalf("malformed body: %d %s", code, body)
	}
	huge := []byte(`{"template":"` + strings.Repeat("x", 2<<20) + `"}`)
	if code, body := rawDo(t, http.MethodPost, url, rootToken, huge, nil); code != 400 || !strings.Contains(body, "invalid request body") {
		t.Fatalf("body over 1 MiB: %d %s", code, body)
	}
	if code, _ := rawDo(t, http.MethodPost, url, rootToken, []byte(`{"template":"`+tmpl+`","volumes":[{"name":"imagenet"}]}`), nil); code != 400 {
		t.Fatalf("unknown volume: %d", code)
	}
}

func TestClaimAuthAndTenantStamping(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)

	_, err := client(t, n, "").Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	_, err = client(t, n, unknownTok).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)

	a := client(t, n, tenantA)
	mine, err := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatalf("tenant claim: %v", err)
	}
	theirs, err := client(t, n, tenantB).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	// A tenant's index holds only its own claims; root sees all.
	rows, err := a.Sandboxes(ctx, "")
	if err != nil || len(rows) != 1 || rows[0].ID != mine.ID {
		t.Fatalf("tenant index = %+v, %v", rows, err)
	}
	rows, err = client(t, n, rootToken).Sandboxes(ctx, "")
	if err != nil || len(rows) != 2 {
		t.Fatalf("root index = %+v, %v", rows, err)
	}
	_ = theirs

	// team-a is capped at 3 live claims: two more succeed, the fourth is 429.
	for range 2 {
		if _, err := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
			t.Fatalf("tenant claim under cap: %v", err)
		}
	}
	_, err = a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, NoRedirect: true})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)
	if _, err := client(t, n, tenantB).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatalf("another tenant is not capped by team-a: %v", err)
	}
}

func TestNodeMaxClaimsAndColdProvision(t *testing.T) {
	cfg := testConfig()
	cfg.MaxClaims = 2
	cfg.ColdProvisionDelay = 20 * time.Millisecond
	n := startNode(t, cfg)
	root := client(t, n, rootToken)
	ctx := ctxT(t)

	// An unpooled key cold-boots locally.
	cold, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: "other:1"})
	if err != nil {
		t.Fatalf("cold claim: %v", err)
	}
	if c := n.Counters(); c.ClaimsCold != 1 {
		t.Fatalf("want one cold claim, counters %+v", c)
	}
	if _, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatal(err)
	}
	_, err = root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)

	// Releasing frees the slot.
	if err := root.Release(ctx, cold.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatalf("claim after release: %v", err)
	}
}

func TestWarmMissOnPooledKeyClonesFromGolden(t *testing.T) {
	cfg := testConfig()
	cfg.Pools = []sandboxd.PoolSpec{{Template: tmpl, Warm: 0}} // golden only
	n := startNode(t, cfg)
	root := client(t, n, rootToken)
	ctx := ctxT(t)
	poll.Until(t, "the pool's golden image", func() bool {
		info, err := root.Info(ctx)
		if err != nil {
			return false
		}
		p, _ := info.Pool(baseKey)
		return p.Golden
	})
	if _, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatal(err)
	}
	if _, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: "unpooled:1"}); err != nil {
		t.Fatal(err)
	}
	if c := n.Counters(); c.ClaimsClone != 1 || c.ClaimsCold != 1 || c.ClaimsWarm != 0 {
		t.Fatalf("want one golden clone and one cold boot, got %+v", c)
	}
}
