package metrics_test

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// TestFleetViewGauges: three nodes share a pool key, one in each state.
// Only the fresh node's warm VMs count as warm; every node's target
// counts; the stale and silent nodes count as below target, as does the
// fresh one short of its own; the age is the oldest node's.
func TestFleetViewGauges(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(now)
	key := sandbox.PoolKey{Template: "base:24.04"} // default lane and size
	big := sandbox.PoolKey{Template: "base:24.04", Size: "large"}
	nodes := []metrics.FleetNode{
		{State: metrics.NodeFresh, HeardAt: now.Add(-10 * time.Second), Pools: []metrics.FleetPool{{Key: key, Warm: 2, Target: 3}, {Key: big, Warm: 1, Target: 1}}},
		{State: metrics.NodeStale, HeardAt: now.Add(-5 * time.Minute), Pools: []metrics.FleetPool{{Key: key, Warm: 3, Target: 3}}},
		{State: metrics.NodeSilent, HeardAt: now.Add(-20 * time.Second), Pools: []metrics.FleetPool{{Key: key, Warm: 3, Target: 3}}},
	}
	reg := prometheus.NewRegistry()
	metrics.RegisterFleetView(reg, func() []metrics.FleetNode { return nodes }, clk)

	want := `
# HELP sandbox_operator_pool_warm Warm VMs ready to claim, summed over the nodes that take claims, per pool key.
# TYPE sandbox_operator_pool_warm gauge
sandbox_operator_pool_warm{lane="none",template="base:24.04",tier="large"} 1
sandbox_operator_pool_warm{lane="none",template="base:24.04",tier="small"} 2
# HELP sandbox_operator_pool_target Warm VMs the nodes are asked to keep, summed over every node the view lists (a silent or stale node's target stays counted, its warm VMs do not), per pool key.
# TYPE sandbox_operator_pool_target gauge
sandbox_operator_pool_target{lane="none",template="base:24.04",tier="large"} 1
sandbox_operator_pool_target{lane="none",template="base:24.04",tier="small"} 9
# HELP sandbox_operator_pool_nodes_below_target Nodes whose pool holds fewer warm VMs than its target (a silent or stale node counts as below), per pool key.
# TYPE sandbox_operator_pool_nodes_below_target gauge
sandbox_operator_pool_nodes_below_target{lane="none",template="base:24.04",tier="large"} 0
sandbox_operator_pool_nodes_below_target{lane="none",template="base:24.04",tier="small"} 3
# HELP sandbox_operator_nodes Nodes the view lists, by state: fresh (takes claims), stale (inventory out of the freshness window), silent (did not answer).
# TYPE sandbox_operator_nodes gauge
sandbox_operator_nodes{state="fresh"} 1
sandbox_operator_nodes{state="silent"} 1
sandbox_operator_nodes{state="stale"} 1
# HELP sandbox_operator_inventory_age_seconds Age of the oldest data the view holds about a node: since its inventory was published, or since the mesh last heard from it.
# TYPE sandbox_operator_inventory_age_seconds gauge
sandbox_operator_inventory_age_seconds 300
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}

	// The view changes under the collector: the next scrape shows it.
	nodes = nodes[:1]
	nodes[0].Pools[0].Warm = 3
	want = `
# HELP sandbox_operator_pool_nodes_below_target Nodes whose pool holds fewer warm VMs than its target (a silent or stale node counts as below), per pool key.
# TYPE sandbox_operator_pool_nodes_below_target gauge
sandbox_operator_pool_nodes_below_target{lane="none",template="base:24.04",tier="large"} 0
sandbox_operator_pool_nodes_below_target{lane="none",template="base:24.04",tier="small"} 0
# HELP sandbox_operator_nodes Nodes the view lists, by state: fresh (takes claims), stale (inventory out of the freshness window), silent (did not answer).
# TYPE sandbox_operator_nodes gauge
sandbox_operator_nodes{state="fresh"} 1
sandbox_operator_nodes{state="silent"} 0
sandbox_operator_nodes{state="stale"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_pool_nodes_below_target", "sandbox_operator_nodes"); err != nil {
		t.Fatal(err)
	}
}

// TestFleetViewEmpty: a view with no node reports zero nodes in each
// state and no pool or age series (no data is not an age of zero).
func TestFleetViewEmpty(t *testing.T) {
	reg := prometheus.NewRegistry()
	metrics.RegisterFleetView(reg, func() []metrics.FleetNode { return nil }, nil)
	n, err := testutil.GatherAndCount(reg)
	if err != nil || n != 3 {
		t.Fatalf("an empty view exports %d series (%v), want the 3 node states only", n, err)
	}
}

// TestFleetViewUnknownTier: a size outside the tiers is labelled "other",
// so a node's odd pool adds one series, not one per spelling.
func TestFleetViewUnknownTier(t *testing.T) {
	reg := prometheus.NewRegistry()
	nodes := []metrics.FleetNode{{State: metrics.NodeFresh, Pools: []metrics.FleetPool{
		{Key: sandbox.PoolKey{Template: "t", Size: "huge-1"}, Warm: 1, Target: 1},
		{Key: sandbox.PoolKey{Template: "t", Size: "huge-2"}, Warm: 1, Target: 1},
	}}}
	metrics.RegisterFleetView(reg, func() []metrics.FleetNode { return nodes }, nil)
	want := `
# HELP sandbox_operator_pool_warm Warm VMs ready to claim, summed over the nodes that take claims, per pool key.
# TYPE sandbox_operator_pool_warm gauge
sandbox_operator_pool_warm{lane="none",template="t",tier="other"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_pool_warm"); err != nil {
		t.Fatal(err)
	}
}
