package warmpool

import (
	"slices"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// observed is what the nodes reported for one pool key, summed over nodes.
type observed struct {
	// Replicas counts the pool's VMs that exist or are being made (warm
	// plus refilling); Ready counts the warm ones, claimable now.
	Replicas, Ready int
}

// observedByKey sums the pool rows of the nodes' last PUT answers for the
// keys the driver wants; rows of other keys (pools still draining) are
// not any SandboxWarmPool's.
func observedByKey(infos []*sandboxd.Info, wanted map[sandbox.PoolKey]int) map[sandbox.PoolKey]observed {
	out := make(map[sandbox.PoolKey]observed, len(wanted))
	for _, info := range infos {
		if info == nil {
			continue
		}
		for _, row := range info.Pools {
			key := row.Key.WithDefaults()
			if _, ok := wanted[key]; !ok {
				continue
			}
			o := out[key]
			o.Ready += max(row.Warm, 0)
			o.Replicas += max(row.Warm, 0) + max(row.Refilling, 0)
			out[key] = o
		}
	}
	return out
}

// splitShares divides total among parties in proportion to weights by the
// largest-remainder method: the shares sum to total exactly (when any
// weight is positive), each is within one of its exact proportion, and
// ties go to the earlier party so every replica computes the same split.
// Two SandboxWarmPools warming one key each report their part of it.
func splitShares(total int, weights []int) []int {
	out := make([]int, len(weights))
	sum := 0
	for _, w := range weights {
		sum += max(w, 0)
	}
	if total <= 0 || sum == 0 {
		return out
	}
	type rem struct{ i, r int }
	rems := make([]rem, 0, len(weights))
	given := 0
	for i, w := range weights {
		w = max(w, 0)
		// total*w fits easily: both are bounded by int32 replica counts.
		out[i] = total * w / sum
		given += out[i]
		rems = append(rems, rem{i, total * w % sum})
	}
	slices.SortStableFunc(rems, func(a, b rem) int { return b.r - a.r })
	for k := 0; given < total; k++ {
		out[rems[k].i]++
		given++
	}
	return out
}
