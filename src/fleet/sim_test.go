package fleet_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	simfleet "github.com/cocoonstack/sandbox-operator/src/simulator/fleet"
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
