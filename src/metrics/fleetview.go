package metrics

import (
	"cmp"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// NodeState is how a front's view of the fleet sees one node, as the
// state label says it.
type NodeState string

// The node states, a fixed set.
const (
	// NodeFresh is a node that takes claims: its inventory is within the
	// freshness window (the Kubernetes front) or it answered the last
	// probe (the mesh), and it answered its last claim.
	NodeFresh NodeState = "fresh"
	// NodeStale is a node whose published inventory fell out of the
	// freshness window: its publisher stopped, or its clock is off.
	NodeStale NodeState = "stale"
	// NodeSilent is a node the view lists but that did not answer: a
	// claim or a probe got no answer from it.
	NodeSilent NodeState = "silent"
)

var nodeStates = []NodeState{NodeFresh, NodeStale, NodeSilent}

// FleetNode is one node as a front's view holds it at a scrape.
type FleetNode struct {
	State NodeState
	// HeardAt is when the view last heard from the node: its inventory's
	// publishedAt, or the mesh's last good probe. Zero when it never did.
	HeardAt time.Time
	Pools   []FleetPool
}

// FleetPool is one pool of one node.
type FleetPool struct {
	Key          sandbox.PoolKey
	Warm, Target int
}

// FleetSource answers the nodes the view holds now. It is called at every
// scrape, so it must read memory only, never a node.
type FleetSource func() []FleetNode

// fleetView is a collector over a FleetSource: the pool and node gauges
// are computed from the view at scrape time, so they can never drift from
// what the fronts place claims by.
type fleetView struct {
	source FleetSource
	clock  clock.PassiveClock

	warm, target, below, nodes, age *prometheus.Desc
}

// RegisterFleetView registers, with reg, the gauges of the warm pools and
// nodes that source shows: per pool key (template, lane, tier), the warm
// VMs on the nodes that take claims, the target of every node the view
// lists, and the nodes below target; the nodes by state; and the age of
// the oldest node's data. clk is the process clock (nil: the real one).
func RegisterFleetView(reg prometheus.Registerer, source FleetSource, clk clock.PassiveClock) {
	poolLabels := []string{"template", "lane", "tier"}
	v := &fleetView{
		source: source,
		clock:  cmp.Or[clock.PassiveClock](clk, clock.RealClock{}),
		warm: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "pool_warm"),
			"Warm VMs ready to claim, summed over the nodes that take claims, per pool key.", poolLabels, nil),
		target: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "pool_target"),
			"Warm VMs the nodes are asked to keep, summed over every node the view lists (a silent or stale node's target stays counted, its warm VMs do not), per pool key.", poolLabels, nil),
		below: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "pool_nodes_below_target"),
			"Nodes whose pool holds fewer warm VMs than its target (a silent or stale node counts as below), per pool key.", poolLabels, nil),
		nodes: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "nodes"),
			"Nodes the view lists, by state: fresh (takes claims), stale (inventory out of the freshness window), silent (did not answer).", []string{"state"}, nil),
		age: prometheus.NewDesc(prometheus.BuildFQName(Namespace, "", "inventory_age_seconds"),
			"Age of the oldest data the view holds about a node: since its inventory was published, or since the mesh last heard from it.", nil, nil),
	}
	register(reg, prometheus.Collector(v))
}

func (v *fleetView) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{v.warm, v.target, v.below, v.nodes, v.age} {
		ch <- d
	}
}

// poolLabels is a pool key as the pool gauges label it.
type poolLabels struct{ template, lane, tier string }

// poolTotals is one pool key's sums over the nodes.
type poolTotals struct{ warm, target, below int }

func (v *fleetView) Collect(ch chan<- prometheus.Metric) {
	nodes := v.source()
	now := v.clock.Now()
	states := map[NodeState]int{}
	pools := map[poolLabels]*poolTotals{}
	var oldest time.Duration
	heard := false
	for _, n := range nodes {
		state := n.State
		if state != NodeFresh && state != NodeStale && state != NodeSilent {
			state = NodeSilent
		}
		states[state]++
		if !n.HeardAt.IsZero() {
			oldest, heard = max(oldest, now.Sub(n.HeardAt)), true
		}
		for _, p := range n.Pools {
			l := labelsOf(p.Key)
			t := pools[l]
			if t == nil {
				t = &poolTotals{}
				pools[l] = t
			}
			t.target += p.Target
			warm := 0
			if state == NodeFresh {
				warm = p.Warm
			}
			t.warm += warm
			if warm < p.Target {
				t.below++
			}
		}
	}
	for _, s := range nodeStates {
		ch <- prometheus.MustNewConstMetric(v.nodes, prometheus.GaugeValue, float64(states[s]), string(s))
	}
	if heard {
		ch <- prometheus.MustNewConstMetric(v.age, prometheus.GaugeValue, max(oldest, 0).Seconds())
	}
	for l, t := range pools {
		ch <- prometheus.MustNewConstMetric(v.warm, prometheus.GaugeValue, float64(t.warm), l.template, l.lane, l.tier)
		ch <- prometheus.MustNewConstMetric(v.target, prometheus.GaugeValue, float64(t.target), l.template, l.lane, l.tier)
		ch <- prometheus.MustNewConstMetric(v.below, prometheus.GaugeValue, float64(t.below), l.template, l.lane, l.tier)
	}
}

// labelsOf labels a pool key, with a node's defaults for an empty lane or
// size and "other" for a size outside the tiers.
func labelsOf(key sandbox.PoolKey) poolLabels {
	key = key.WithDefaults()
	tier := key.Size
	if _, ok := sandbox.SizeOf(tier); !ok {
		tier = other
	}
	return poolLabels{template: key.Template, lane: key.Net, tier: tier}
}
