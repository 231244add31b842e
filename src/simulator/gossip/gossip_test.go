package gossip_test

import (
	"context"
	"errors"
	"fmt"
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
	rootToken = "mesh-root"
	tmpl      = "base:24.04"
	interval  = 50 * time.Millisecond
)

var key = sandbox.PoolKey{Template: tmpl, Net: "none", Size: "small"}

func start(t *testing.T, nodes int, join []string) *simfleet.Fleet {
	t.Helper()
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: nodes, RootToken: rootToken, Join: join, GossipInterval: interval,
		NamePrefix: t.Name() + "-",
	})
	if err != nil {
		t.Fatalf("start fleet: %v", err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

func client(t *testing.T, addr string) *sandboxd.Client {
	c, err := sandboxd.New(addr, sandboxd.WithToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitPeers polls GET /v1/peers of addr until it lists exactly want.
func waitPeers(t *testing.T, addr string, want []string) {
	t.Helper()
	want = slices.Sorted(slices.Values(want))
	poll.UntilNil(t, "the peers of "+addr, func() error {
		got, err := client(t, addr).Peers(context.Background())
		if err != nil {
			return err
		}
		if slices.Sort(got); !slices.Equal(got, want) {
			return fmt.Errorf("peers %v, want %v", got, want)
		}
		return nil
	})
}

// TestSeparateFleetsFormOneMesh: fleets that only know one seed of each
// other end with every node listing every other, both ways and
// transitively, as a memberlist join does.
func TestSeparateFleetsFormOneMesh(t *testing.T) {
	a := start(t, 2, nil)
	b := start(t, 1, []string{a.Addrs()[0]})
	c := start(t, 1, []string{b.Addrs()[0]}) // knows only b; learns a through it
	all := slices.Concat(a.Addrs(), b.Addrs(), c.Addrs())
	for _, addr := range all {
		waitPeers(t, addr, slices.DeleteFunc(slices.Clone(all), func(s string) bool { return s == addr }))
	}
}

// TestWarmMissRedirectsAcrossProcesses: a node without warm capacity
// redirects a claim to a member of another fleet that gossip says is warm,
// and following the redirect claims there.
func TestWarmMissRedirectsAcrossProcesses(t *testing.T) {
	a := start(t, 1, nil)
	b := start(t, 1, []string{a.Addrs()[0]})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	warm := a.Node(0)
	if _, err := client(t, warm.Addr()).SetPools(ctx, []sandboxd.PoolSpec{{Template: tmpl, Warm: 2}}); err != nil {
		t.Fatal(err)
	}
	if err := warm.WaitWarm(ctx, key, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := client(t, b.Addrs()[0]).SetPools(ctx, []sandboxd.PoolSpec{{Template: tmpl, Warm: 0}}); err != nil {
		t.Fatal(err)
	}
	// Gossip carries a's warm count to b within a few rounds.
	var resp *sandboxd.ClaimResponse
	poll.UntilNil(t, "a redirect to the warm node", func() error {
		var err error
		resp, err = client(t, b.Addrs()[0]).ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "ns/probe"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.IsRedirect() {
			return nil
		}
		// A cold claim was granted locally before gossip arrived; hand it
		// back and try again.
		_ = client(t, b.Addrs()[0]).Release(ctx, resp.ID)
		return errors.New("the claim was granted locally")
	})
	if !slices.Equal(resp.Redirect, []string{warm.Addr()}) {
		t.Fatalf("redirect = %v, want [%s]", resp.Redirect, warm.Addr())
	}
	cl, err := client(t, b.Addrs()[0]).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "ns/followed"})
	if err != nil {
		t.Fatal(err)
	}
	if cl.OwnerAddr != warm.Addr() {
		t.Fatalf("claim owned by %s, want the warm member %s", cl.OwnerAddr, warm.Addr())
	}
}

// TestDeadMemberLeavesTheMesh: a member that stops answering is dropped
// from the others' peers after about three rounds, and one that comes back
// (a new process at a new address, joining again) is listed again.
func TestDeadMemberLeavesTheMesh(t *testing.T) {
	a := start(t, 1, nil)
	b := start(t, 1, []string{a.Addrs()[0]})
	waitPeers(t, a.Addrs()[0], b.Addrs())
	gone := b.Addrs()[0]
	killed := time.Now()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	waitPeers(t, a.Addrs()[0], nil)
	if took := time.Since(killed); took < 2*interval {
		t.Fatalf("the dead member left after %v, before its suspicion time", took)
	}
	back := start(t, 1, []string{a.Addrs()[0]})
	waitPeers(t, a.Addrs()[0], back.Addrs())
	if slices.Contains(back.Addrs(), gone) {
		t.Logf("the new member reused the port %s", gone)
	}
}

// TestCheckpointProbeReachesOtherProcesses: a checkpoint claim at a node
// that lacks the checkpoint redirects to the member of another fleet that
// holds it (the probe is live, not gossiped).
func TestCheckpointProbeReachesOtherProcesses(t *testing.T) {
	a := start(t, 1, nil)
	b := start(t, 1, []string{a.Addrs()[0]})
	waitPeers(t, b.Addrs()[0], a.Addrs())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ca := client(t, a.Addrs()[0])
	cl, err := ca.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "ns/src"})
	if err != nil {
		t.Fatal(err)
	}
	ck, err := ca.Checkpoint(ctx, cl.ID, sandboxd.CheckpointRequest{Token: cl.Token})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client(t, b.Addrs()[0]).ClaimCheckpointNoFollow(ctx, ck.ID, sandboxd.CheckpointClaimRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(resp.Redirect, a.Addrs()) {
		t.Fatalf("checkpoint claim at the other process answered %+v, want a redirect to %v", resp, a.Addrs())
	}
}

// TestIntroductionsNeedTheRootToken: an /v1/info read that is not the
// mesh's root caller introduces nobody.
func TestIntroductionsNeedTheRootToken(t *testing.T) {
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 1, RootToken: rootToken, GossipInterval: interval,
		Tenants: []node.Tenant{{Name: "team", Token: "tenant-tok"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	member := f.Addrs()[0]
	decoy := start(t, 1, nil) // a real node, so it would pass a read
	for _, token := range []string{"tenant-tok", "wrong", ""} {
		if code := introduce(t, member, token, decoy.Addrs()[0]); code != http.StatusForbidden && code != http.StatusUnauthorized {
			t.Fatalf("read of /v1/info with token %q answered %d, want 401 or 403", token, code)
		}
	}
	// Had a refused read introduced the decoy, the round that first reads
	// the root's first introduction would read the decoy too, and that
	// round ends before the round that first reads the second begins: once
	// the second is a peer, the decoy would be one already.
	first, second := start(t, 1, nil).Addrs()[0], start(t, 1, nil).Addrs()[0]
	if code := introduce(t, member, rootToken, first); code != http.StatusOK {
		t.Fatalf("the root's introduction answered %d", code)
	}
	waitPeers(t, member, []string{first})
	if code := introduce(t, member, rootToken, second); code != http.StatusOK {
		t.Fatalf("the root's introduction answered %d", code)
	}
	waitPeers(t, member, []string{first, second})
}

// introduce reads GET /v1/info of addr as token, introducing member, and
// returns the status.
func introduce(t *testing.T, addr, token, member string) int {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, "http://"+addr+"/v1/info", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(node.IntroductionHeader, member)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
