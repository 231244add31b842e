package fleet

import (
	"math/rand/v2"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Order is the node-choice policy, the same for both fronts: spread, not
// herd. Two of the nodes with warm VMs for key are drawn at random and the
// warmer goes first (the power of two choices); the other warm nodes
// follow in random order. Then come, in random order, the nodes that keep
// a pool of key with none warm as the view last heard (a burst emptied
// it, or the view is a publish behind: sandboxd refills it, and on a miss
// clones from the pool's golden snapshot rather than refusing), and, when
// withCold is set (a fleet that follows sandboxd's redirects), every other
// node.
//
// Sorting warmest first would send every concurrent create to the same
// node until the view catches up, a publish interval later; two random
// choices keep the load within a small factor of even while still
// preferring fuller nodes (docs/architecture.md has the measurement).
func Order(nodes []Node, key sandbox.PoolKey, withCold bool, rng *rand.Rand) []Node {
	key = key.WithDefaults()
	var warm, drained, cold []Node
	for _, n := range nodes {
		if n.Addr == "" {
			continue
		}
		switch w, pooled := n.Warm[key]; {
		case w > 0:
			warm = append(warm, n)
		case pooled:
			drained = append(drained, n)
		case withCold:
			cold = append(cold, n)
		}
	}
	rng.Shuffle(len(warm), func(i, j int) { warm[i], warm[j] = warm[j], warm[i] })
	if len(warm) >= 2 && warm[1].Warm[key] > warm[0].Warm[key] {
		warm[0], warm[1] = warm[1], warm[0]
	}
	rng.Shuffle(len(drained), func(i, j int) { drained[i], drained[j] = drained[j], drained[i] })
	rng.Shuffle(len(cold), func(i, j int) { cold[i], cold[j] = cold[j], cold[i] })
	return append(append(warm, drained...), cold...)
}
