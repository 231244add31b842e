package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// TestVolumesLeaveOutANodeDownAndFailWithAll: the catalog counts the
// nodes that declare a volume, leaves a node that is down out of the
// count, and is an error only when no node answers.
func TestVolumesLeaveOutANodeDownAndFailWithAll(t *testing.T) {
	const root = "volumes-root"
	sim, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 2, RootToken: root, EchoPorts: []int{},
		Pools:   []sandboxd.PoolSpec{{Template: baseKey.Template, Warm: 1}},
		Volumes: []node.Volume{{Name: "models", Dir: t.TempDir()}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	f := overSim(t, sim, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	nodesDeclaring := func() int {
		t.Helper()
		vols, err := f.Volumes(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(vols) != 1 || vols[0].Name != "models" || !vols[0].Available {
			t.Fatalf("catalog %+v, want models available", vols)
		}
		return vols[0].Nodes
	}
	if n := nodesDeclaring(); n != 2 {
		t.Errorf("models on %d nodes, want 2", n)
	}
	if err := sim.Kill(0); err != nil {
		t.Fatal(err)
	}
	if n := nodesDeclaring(); n != 1 {
		t.Errorf("with node 0 down, models on %d nodes, want 1", n)
	}
	if err := sim.Kill(1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Volumes(ctx); fleet.Classify(err) != fleet.KindUnavailable {
		t.Errorf("with every node down the catalog = %v, want KindUnavailable", err)
	}
}
