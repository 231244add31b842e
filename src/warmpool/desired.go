package warmpool

import (
	"cmp"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// demand is one SandboxWarmPool resolved to the pool it warms.
type demand struct {
	Pool     types.NamespacedName
	Key      sandbox.PoolKey
	Replicas int
}

// totalsByKey sums the replicas of every demand per pool key: two
// SandboxWarmPools whose templates resolve to the same key warm one pool
// on the nodes, of their combined size.
func totalsByKey(demands []demand) map[sandbox.PoolKey]int {
	out := make(map[sandbox.PoolKey]int, len(demands))
	for _, d := range demands {
		out[d.Key] += max(d.Replicas, 0)
	}
	return out
}

// desiredSets is each node's full pool set: every key placed over nodes,
// each node's shares gathered into one list sorted by key. Every node
// gets an entry, an empty set when it holds no share, because a node's
// pools the driver no longer wants must be drained by the next PUT.
// Shares of zero are left out: an omitted pool drains just the same.
func desiredSets(totals map[sandbox.PoolKey]int, nodes []string) map[string][]sandboxd.PoolSpec {
	out := make(map[string][]sandboxd.PoolSpec, len(nodes))
	for _, n := range nodes {
		out[n] = []sandboxd.PoolSpec{}
	}
	for key, total := range totals {
		for node, share := range Place(key, total, nodes) {
			out[node] = append(out[node], sandboxd.PoolSpec{
				Template: key.Template, Net: key.Net, Size: key.Size, Warm: share,
			})
		}
	}
	for _, set := range out {
		slices.SortFunc(set, func(a, b sandboxd.PoolSpec) int { return compareKeys(a.Key(), b.Key()) })
	}
	return out
}

func compareKeys(a, b sandbox.PoolKey) int {
	return cmp.Or(
		strings.Compare(a.Template, b.Template),
		strings.Compare(a.Net, b.Net),
		strings.Compare(a.Size, b.Size),
	)
}

// signature renders a sorted pool set canonically, so that an unchanged
// set is recognised without a PUT. Lengths prefix every field: no
// template name can forge another set's signature.
func signature(set []sandboxd.PoolSpec) string {
	var b strings.Builder
	for _, p := range set {
		for _, f := range []string{p.Template, p.Net, p.Size} {
			b.WriteString(strconv.Itoa(len(f)))
			b.WriteByte(':')
			b.WriteString(f)
		}
		b.WriteByte('=')
		b.WriteString(strconv.Itoa(p.Warm))
		b.WriteByte(';')
	}
	return b.String()
}
