package publisher_test

import (
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
)

func TestNodeInventoryFromSnapshot(t *testing.T) {
	claimed := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	deadline := claimed.Add(5 * time.Minute)
	inv := publisher.FromSnapshot(node.Snapshot{
		Node:    "sim-node-0",
		Address: "127.0.0.1:7001",
		Pools: []node.PoolSnapshot{
			{Template: "base:24.04", Net: "none", Size: "small", Warm: 3, Target: 4},
			{Template: "py:3.12", Net: "none", Size: "large", Warm: 0, Target: 2},
		},
		Entries: []node.EntrySnapshot{
			{Name: "default/a", Phase: node.PhaseRunning, ID: "sb_a", ClaimRef: "default/a", Addr: "127.0.0.1:7001",
				Template: "base:24.04", Deadline: deadline, ClaimedAt: claimed},
			{Name: "sb_b", Phase: node.PhaseHibernated, ID: "sb_b", Addr: "127.0.0.1:7001", Template: "py:3.12"},
		},
	})

	if inv.Name != "sim-node-0" || inv.Node != "sim-node-0" || inv.Address != "127.0.0.1:7001" || inv.PublishedAt != nil {
		t.Fatalf("inventory header = %q %q %q %v", inv.Name, inv.Node, inv.Address, inv.PublishedAt)
	}
	wantPools := []v1beta1.PoolCapacity{
		{Template: "base:24.04", Net: "none", Size: "small", Warm: 3, Target: 4},
		{Template: "py:3.12", Net: "none", Size: "large", Warm: 0, Target: 2},
	}
	if len(inv.Pools) != len(wantPools) || inv.Pools[0] != wantPools[0] || inv.Pools[1] != wantPools[1] {
		t.Fatalf("pools = %+v", inv.Pools)
	}
	if len(inv.Entries) != 2 {
		t.Fatalf("entries = %+v", inv.Entries)
	}
	a, b := inv.Entries[0], inv.Entries[1]
	if a.Name != "default/a" || a.Phase != v1beta1.SandboxPhaseRunning || a.ID != "sb_a" || a.ClaimRef != "default/a" ||
		a.Addr != "127.0.0.1:7001" || a.Template != "base:24.04" ||
		a.Deadline == nil || !a.Deadline.Time.Equal(deadline) || a.ClaimedAt == nil || !a.ClaimedAt.Time.Equal(claimed) {
		t.Errorf("running entry = %+v", a)
	}
	if b.Name != "sb_b" || b.Phase != v1beta1.SandboxPhaseHibernated || b.ClaimRef != "" || b.Template != "py:3.12" ||
		b.Deadline != nil || b.ClaimedAt != nil {
		t.Errorf("hibernated entry = %+v", b)
	}

	empty := publisher.FromSnapshot(node.Snapshot{Node: "sim-node-1"})
	if empty.Node != "sim-node-1" || empty.Pools != nil || empty.Entries != nil {
		t.Errorf("empty node inventory = %+v", empty)
	}
}
