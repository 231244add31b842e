package fleet_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// listed reports whether the checkpoint id is on the node's entry.
func listed(n fleet.NodeCheckpoints, id string) bool {
	for _, ck := range n.Checkpoints {
		if ck.ID == id {
			return true
		}
	}
	return false
}

// TestNodeCheckpointsAndDeleteCheckpoint: a checkpoint is listed on the
// entry of the node that took it, with that node's address, and outlives
// its sandbox; deleting it there removes it, and deleting it again is
// KindNotFound. A node that is down is an entry with its error.
func TestNodeCheckpointsAndDeleteCheckpoint(t *testing.T) {
	const root = "checkpoints-root"
	sim := startWarmSim(t, root, 2, 1)
	f := overSim(t, sim, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := sim.Node(1).Addr()
	c := claimOn(t, root, addr, "checkpointed")
	ck, err := f.Checkpoint(ctx, c.Sandbox, "ns:before")
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Release(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}

	nodes := f.NodeCheckpoints(ctx)
	if len(nodes) != 2 {
		t.Fatalf("%d entries, want 2", len(nodes))
	}
	if nodes[1].Err != nil || nodes[1].Addr != addr || !listed(nodes[1], ck.ID) {
		t.Fatalf("node 1's entry %+v does not list %s", nodes[1], ck.ID)
	}
	if nodes[0].Err != nil || listed(nodes[0], ck.ID) {
		t.Fatalf("node 0's entry %+v: want it read, without %s", nodes[0], ck.ID)
	}

	if err := f.DeleteCheckpoint(ctx, addr, ck.ID); err != nil {
		t.Fatal(err)
	}
	if nodes := f.NodeCheckpoints(ctx); listed(nodes[1], ck.ID) {
		t.Error("the checkpoint is listed after its delete")
	}
	err = f.DeleteCheckpoint(ctx, addr, ck.ID)
	if k := fleet.Classify(err); k != fleet.KindNotFound || !errors.Is(err, sandboxd.ErrNotFound) {
		t.Errorf("a second delete = %v (kind %v), want sandboxd.ErrNotFound", err, k)
	}

	if err := sim.Kill(0); err != nil {
		t.Fatal(err)
	}
	nodes = f.NodeCheckpoints(ctx)
	if nodes[0].Err == nil || fleet.Classify(nodes[0].Err) != fleet.KindUnavailable {
		t.Errorf("the killed node's entry: err %v, want one classified unavailable", nodes[0].Err)
	}
	if nodes[1].Err != nil {
		t.Errorf("the live node failed beside the dead one: %v", nodes[1].Err)
	}
}
