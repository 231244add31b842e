package main

import (
	"slices"

	corefleet "github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// inventoryFleetView is the fleet as the Kubernetes front sees it, for the
// pool and node gauges: every NodeInventory the store holds, stale or
// fresh, and, among the fresh ones, those whose last claim the fleet
// core got no answer from (silent).
func inventoryFleetView(store *inventory.Store, core *corefleet.Fleet) metrics.FleetSource {
	return func() []metrics.FleetNode {
		silent := core.SilentNodes()
		known := store.Known()
		out := make([]metrics.FleetNode, 0, len(known))
		for _, n := range known {
			fn := metrics.FleetNode{State: metrics.NodeFresh, HeardAt: n.PublishedAt}
			switch {
			case !n.Fresh:
				fn.State = metrics.NodeStale
			case slices.Contains(silent, n.Address):
				fn.State = metrics.NodeSilent
			}
			for _, p := range n.Pools {
				fn.Pools = append(fn.Pools, metrics.FleetPool{
					Key:  sandbox.PoolKey{Template: p.Template, Net: p.Net, Size: p.Size},
					Warm: int(p.Warm), Target: int(p.Target),
				})
			}
			out = append(out, fn)
		}
		return out
	}
}
