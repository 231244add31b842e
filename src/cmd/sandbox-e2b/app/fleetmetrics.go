package app

import (
	"github.com/cocoonstack/sandbox-operator/src/mesh"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
)

// meshFleetView is the fleet as the mesh sees it, for the pool and node
// gauges: a node that answered the last probe is fresh, any other address
// the view holds (a seed never reached, a member that stopped answering)
// is silent, and keeps the pools it last reported so that its targets
// still count. The mesh reads nodes live, so nothing is ever stale.
func meshFleetView(m *mesh.Mesh) metrics.FleetSource {
	return func() []metrics.FleetNode {
		view := m.View()
		out := make([]metrics.FleetNode, 0, len(view))
		for _, n := range view {
			fn := metrics.FleetNode{State: metrics.NodeFresh, HeardAt: n.SeenAt}
			if !n.Live {
				fn.State = metrics.NodeSilent
			}
			for _, p := range n.Pools {
				fn.Pools = append(fn.Pools, metrics.FleetPool{Key: p.Key, Warm: p.Warm, Target: p.Target})
			}
			out = append(out, fn)
		}
		return out
	}
}
