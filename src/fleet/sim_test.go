package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// baseKey is the pool the tests of this package claim from.
var baseKey = sandbox.PoolKey{Template: "base:24.04", Net: "none", Size: "small"}

// startWarmSim starts nodes simulated nodes under root, each keeping warm
// baseKey VMs, and waits until every one holds them.
func startWarmSim(t *testing.T, root string, nodes, warm int) *simfleet.Fleet {
	t.Helper()
	sim, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: nodes, RootToken: root, EchoPorts: []int{},
		Pools: []sandboxd.PoolSpec{{Template: baseKey.Template, Warm: warm}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, n := range sim.Nodes() {
		if err := n.WaitWarm(ctx, baseKey, warm); err != nil {
			t.Fatal(err)
		}
	}
	return sim
}

// overSim is a Fleet over every node of sim, each shown keeping warm
// baseKey VMs, with the root token.
func overSim(t *testing.T, sim *simfleet.Fleet, root string) *fleet.Fleet {
	t.Helper()
	var view nodesView
	for _, n := range sim.Nodes() {
		view = append(view, fleet.Node{Name: n.Name(), Addr: n.Addr(), Warm: map[sandbox.PoolKey]int{baseKey: 1}})
	}
	f, err := fleet.New(fleet.Config{View: view, Token: root, NodeTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	return f
}

// claimOn claims a baseKey sandbox on the node at addr, through a fleet
// whose view shows that node alone.
func claimOn(t *testing.T, root, addr, name string) fleet.Claimed {
	t.Helper()
	one, err := fleet.New(fleet.Config{View: nodesView{{Name: addr, Addr: addr, Warm: map[sandbox.PoolKey]int{baseKey: 1}}}, Token: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	c, err := one.Claim(context.Background(), fleet.ClaimRequest{Ref: sandbox.ClaimRef{Namespace: "ns", Name: name}, Key: baseKey, TTLSeconds: 600})
	if err != nil {
		t.Fatalf("claim %s at %s: %v", name, addr, err)
	}
	if c.NodeAddr != addr {
		t.Fatalf("claim %s landed at %s, want %s", name, c.NodeAddr, addr)
	}
	return c
}
