package publisher

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// FromSnapshot converts a simulated node's snapshot into the NodeInventory
// the node publishes, the fields vk-sandbox fills on a real node. It is the
// one conversion: the simulator's publishers and the tests' inventories
// both use it. publishedAt is left to the Publisher, which stamps each apply.
func FromSnapshot(s node.Snapshot) *v1beta1.NodeInventory {
	inv := &v1beta1.NodeInventory{Node: s.Node, Address: s.Address}
	inv.Name = s.Node
	for _, p := range s.Pools {
		inv.Pools = append(inv.Pools, v1beta1.PoolCapacity{
			Template: p.Template, Net: p.Net, Size: p.Size,
			Warm: clampInt32(p.Warm), Target: clampInt32(p.Target),
		})
	}
	for _, e := range s.Entries {
		inv.Entries = append(inv.Entries, v1beta1.InventoryEntry{
			Name:      e.Name,
			Phase:     v1beta1.SandboxPhase(e.Phase),
			ID:        e.ID,
			ClaimRef:  e.ClaimRef,
			Addr:      e.Addr,
			Template:  e.Template,
			Net:       e.Net,
			Size:      e.Size,
			Deadline:  timeOrNil(e.Deadline),
			ClaimedAt: timeOrNil(e.ClaimedAt),
		})
	}
	return inv
}

// timeOrNil leaves an unknown time out rather than publishing year 1.
func timeOrNil(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

func clampInt32(n int) int32 {
	const maxInt32 = 1<<31 - 1
	switch {
	case n < 0:
		return 0
	case n > maxInt32:
		return maxInt32
	default:
		return int32(n)
	}
}
