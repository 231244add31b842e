package simfleet_test

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

const (
	rootToken = "fleet-root"
	tenantTok = "fleet-tenant"
	tmpl      = "base:24.04"
)

var key = sandbox.PoolKey{Template: tmpl, Net: "none", Size: "small"}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func startFleet(t testing.TB, cfg simfleet.Config) *simfleet.Fleet {
	t.Helper()
	if cfg.RootToken == "" {
		cfg.RootToken = rootToken
	}
	cfg.Tenants = []node.Tenant{{Name: "team", Token: tenantTok}}
	f, err := simfleet.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("start fleet: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func clientFor(t *testing.T, n *node.Node, token string) *sandboxd.Client {
	c, err := sandboxd.New(n.Addr(), sandboxd.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func setWarm(t *testing.T, n *node.Node, warm int) {
	t.Helper()
	ctx := ctxT(t)
	if _, err := clientFor(t, n, rootToken).SetPools(ctx, []sandboxd.PoolSpec{{Template: tmpl, Warm: warm}}); err != nil {
		t.Fatal(err)
	}
	if err := n.WaitWarm(ctx, key, warm); err != nil {
		t.Fatalf("%s never warmed: %v", n.Name(), err)
	}
}

func TestFleetNamesAddressesAndPeers(t *testing.T) {
	f := startFleet(t, simfleet.Config{Nodes: 3})
	ctx := ctxT(t)
	nodes := f.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("nodes = %d", len(nodes))
	}
	seen := map[string]bool{}
	for i, n := range nodes {
		if n.Name() != "sim-node-"+string(rune('0'+i)) || seen[n.Addr()] {
			t.Fatalf("node %d: %s at %s", i, n.Name(), n.Addr())
		}
		seen[n.Addr()] = true
	}
	a := nodes[0]
	peers, err := clientFor(t, a, tenantTok).Peers(ctx)
	slices.Sort(peers)
	want := []string{nodes[1].Addr(), nodes[2].Addr()}
	slices.Sort(want)
	if err != nil || !slices.Equal(peers, want) {
		t.Fatalf("peers of A = %v %v, want %v", peers, err, want)
	}
	info, _ := clientFor(t, a, rootToken).Info(ctx)
	if len(info.Peers) != 2 {
		t.Fatalf("info peers = %v", info.Peers)
	}

	// A killed node leaves the mesh and stops answering.
	if err := f.Kill(2); err != nil {
		t.Fatal(err)
	}
	peers, _ = clientFor(t, a, rootToken).Peers(ctx)
	if !slices.Equal(peers, []string{nodes[1].Addr()}) || f.Alive(2) || len(f.Addrs()) != 2 {
		t.Fatalf("after kill: peers %v alive %v", peers, f.Alive(2))
	}
	if err := clientFor(t, nodes[2], "").Healthz(ctx); err == nil {
		t.Fatal("a killed node must not answer")
	}
}

func TestClaimRedirectProtocol(t *testing.T) {
	f := startFleet(t, simfleet.Config{Nodes: 3, ColdProvisionDelay: time.Millisecond})
	ctx := ctxT(t)
	a, b, c := f.Node(0), f.Node(1), f.Node(2)
	setWarm(t, b, 2) // warm on B only
	atA := clientFor(t, a, tenantTok)

	// The raw answer at A names B.
	raw, err := atA.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil || !slices.Equal(raw.Redirect, []string{b.Addr()}) || raw.ID != "" {
		t.Fatalf("redirect answer = %+v %v", raw, err)
	}
	// Following it lands on B's warm pool; the data plane is B's.
	cl, err := atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "ns/r"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	if cl.OwnerAddr != b.Addr() || b.Counters().ClaimsWarm != 1 || a.Counters().Redirects != 2 {
		t.Fatalf("claim landed at %s; A %+v B %+v", cl.OwnerAddr, a.Counters(), b.Counters())
	}
	atB := clientFor(t, b, rootToken)
	if rows, _ := atB.Sandboxes(ctx, "ns/r"); len(rows) != 1 || rows[0].ID != cl.ID {
		t.Fatalf("B's index = %+v", rows)
	}
	// Only the owner confirms ownership (the Lookup scatter).
	for _, n := range []*node.Node{a, b, c} {
		addr, err := clientFor(t, n, cl.Token).Owner(ctx, cl.ID)
		if n == b {
			if err != nil || addr != b.Addr() {
				t.Fatalf("owner at B: %q %v", addr, err)
			}
		} else if !errors.Is(err, sandboxd.ErrNotFound) {
			t.Fatalf("owner at %s: %v", n.Name(), err)
		}
	}

	// no_redirect at A: A speaks only for itself and cold-provisions.
	local, err := atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, NoRedirect: true})
	if err != nil || local.OwnerAddr != a.Addr() || a.Counters().ClaimsCold != 1 {
		t.Fatalf("no_redirect claim: %+v %v; A %+v", local, err, a.Counters())
	}

	// Warm on B and C: the redirect names both, the warmer first.
	setWarm(t, c, 5)
	if err := b.WaitWarm(ctx, key, 2); err != nil {
		t.Fatal(err)
	}
	raw, err = atA.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil || !slices.Equal(raw.Redirect, []string{c.Addr(), b.Addr()}) {
		t.Fatalf("two-peer redirect = %+v %v", raw, err)
	}
}

func TestRedirectAtCapacityAndFallback(t *testing.T) {
	f := startFleet(t, simfleet.Config{
		Nodes: 3, ColdProvisionDelay: time.Millisecond,
		Customize: func(i int, cfg *node.Config) {
			if i == 0 {
				cfg.MaxClaims = 1 // A
			}
			if i == 1 {
				cfg.MaxClaims = 1 // B
			}
		},
	})
	ctx := ctxT(t)
	a, b := f.Node(0), f.Node(1)
	setWarm(t, a, 1)
	setWarm(t, b, 2)
	atA := clientFor(t, a, rootToken)

	// A's own warm VM first.
	first, err := atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil || first.OwnerAddr != a.Addr() {
		t.Fatalf("first claim: %+v %v", first, err)
	}
	// A is at max_claims: with no_redirect it refuses...
	_, err = atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, NoRedirect: true})
	if !errors.Is(err, sandboxd.ErrCapacity) {
		t.Fatalf("A at max_claims with no_redirect: %v", err)
	}
	// ...without it, it redirects to B, which has warm capacity.
	second, err := atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil || second.OwnerAddr != b.Addr() {
		t.Fatalf("capacity redirect: %+v %v", second, err)
	}
	// Now B is full too but still gossips warm VMs: the redirect's target
	// refuses and the client falls back to A, which is also full.
	_, err = atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if !errors.Is(err, sandboxd.ErrCapacity) || !errors.Is(err, sandboxd.ErrNoRedirectTarget) {
		t.Fatalf("all refused: %v", err)
	}
	// Free A: the walk falls back to it and it provisions locally.
	if err := atA.Release(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	third, err := atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil || third.OwnerAddr != a.Addr() {
		t.Fatalf("fallback to entry node: %+v %v", third, err)
	}
	if b.Counters().Refused == 0 {
		t.Fatal("B must have refused the redirected retry")
	}
}

func TestDrainingNodeRedirectsToWarmPeer(t *testing.T) {
	f := startFleet(t, simfleet.Config{Nodes: 2})
	ctx := ctxT(t)
	a, b := f.Node(0), f.Node(1)
	setWarm(t, a, 1)
	setWarm(t, b, 1)
	atA := clientFor(t, a, rootToken)
	if _, err := atA.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	// A draining node advertises no warm capacity to its peers...
	if _, err := clientFor(t, b, rootToken).Drain(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if !errors.Is(err, sandboxd.ErrCapacity) {
		t.Fatalf("both draining: %v", err)
	}
	// ...and tries a warm peer before answering 429.
	if _, err := clientFor(t, b, rootToken).Undrain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.WaitWarm(ctx, key, 1); err != nil {
		t.Fatal(err)
	}
	cl, err := atA.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil || cl.OwnerAddr != b.Addr() {
		t.Fatalf("draining A must redirect to B: %+v %v", cl, err)
	}
}

func TestCheckpointClaimRedirectsToOwner(t *testing.T) {
	f := startFleet(t, simfleet.Config{Nodes: 3})
	ctx := ctxT(t)
	a, b := f.Node(0), f.Node(1)
	setWarm(t, b, 1)
	atB := clientFor(t, b, rootToken)
	sb, err := atB.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, NoRedirect: true})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := atB.Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{Token: sb.Token})
	if err != nil {
		t.Fatal(err)
	}
	atA := clientFor(t, a, tenantTok)
	raw, err := atA.ClaimCheckpointNoFollow(ctx, ck.ID, sandboxd.CheckpointClaimRequest{})
	if err != nil || !slices.Equal(raw.Redirect, []string{b.Addr()}) {
		t.Fatalf("checkpoint redirect = %+v %v", raw, err)
	}
	branch, err := atA.ClaimCheckpoint(ctx, ck.ID, sandboxd.CheckpointClaimRequest{})
	if err != nil || branch.OwnerAddr != b.Addr() || branch.FromCheckpoint != ck.ID {
		t.Fatalf("branch = %+v %v", branch, err)
	}
	_, err = atA.ClaimCheckpointNoFollow(ctx, ck.ID, sandboxd.CheckpointClaimRequest{NoRedirect: true})
	if sandboxd.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("no_redirect at a non-owner: %v", err)
	}
}

func TestFleetStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	f, err := simfleet.Start(ctx, simfleet.Config{Nodes: 2, RootToken: rootToken})
	if err != nil {
		t.Fatal(err)
	}
	addr := f.Node(0).Addr()
	cancel()
	c, _ := sandboxd.New(addr)
	poll.Until(t, "the fleet to stop serving after its context ended", func() bool {
		return c.Healthz(context.Background()) != nil
	})
	_ = f.Close()
}
