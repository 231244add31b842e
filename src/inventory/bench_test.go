package inventory_test

import (
	"fmt"
	"runtime"
	"testing"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
)

// fill publishes total sandboxes over 20 nodes in 50 namespaces and waits
// for the store to index them.
func fill(b *testing.B, total int) *inventory.Store {
	b.Helper()
	h := inventorytest.Start(b, inventorytest.Options{Clock: clocktesting.NewFakeClock(t0)})
	const nodes = 20
	for n := range nodes {
		var entries []v1beta1.InventoryEntry
		for i := n; i < total; i += nodes {
			entries = append(entries, entry(fmt.Sprintf("ns-%d/sb-%d", i%50, i), fmt.Sprintf("sb_%08x", i), v1beta1.SandboxPhaseRunning))
		}
		h.Publish(inv(fmt.Sprintf("node-%d", n), t0, entries...))
	}
	h.Eventually("the store to index every entry", func() bool { return len(h.Store.List("")) == total })
	return h.Store
}

func BenchmarkLookupByID(b *testing.B) {
	for _, total := range []int{1000, 10000} {
		b.Run(fmt.Sprint(total), func(b *testing.B) {
			s := fill(b, total)
			b.ReportAllocs()
			b.ResetTimer()
			i := 0
			for b.Loop() {
				id := fmt.Sprintf("sb-%08x", i%total)
				if _, ok := s.ByID(id, ""); !ok {
					b.Fatalf("%s not found", id)
				}
				i++
			}
		})
	}
}

func BenchmarkList(b *testing.B) {
	for _, total := range []int{1000, 10000} {
		for _, ns := range []string{"", "ns-7"} {
			b.Run(fmt.Sprintf("%d/ns=%q", total, ns), func(b *testing.B) {
				s := fill(b, total)
				b.ReportAllocs()
				for b.Loop() {
					if len(s.List(ns)) == 0 {
						b.Fatal("empty list")
					}
				}
			})
		}
	}
}

// liveHeap is the heap in use after two collections.
func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkHeldMemory measures what holding 50 000 sandboxes (20 nodes)
// costs: "cache-B/sandbox" is the NodeInventory objects as the informer
// caches them (typed, after Compact), "store-B/sandbox" the store's
// entries, indexes and sorted lists on top.
func BenchmarkHeldMemory(b *testing.B) {
	const total, nodes = 50000, 20
	for b.Loop() {
		before := liveHeap()
		var invs []*v1beta1.NodeInventory
		for n := range nodes {
			var entries []v1beta1.InventoryEntry
			for i := n; i < total; i += nodes {
				entries = append(entries, entry(fmt.Sprintf("ns-%d/sb-%d", i%50, i), fmt.Sprintf("sb_%08x", i), v1beta1.SandboxPhaseRunning))
			}
			invs = append(invs, inv(fmt.Sprintf("node-%d", n), t0, entries...))
		}
		cached := liveHeap()
		src := &handlerSource{}
		s, err := inventory.New(inventory.Config{Source: src, Clock: clocktesting.NewFakeClock(t0)})
		if err != nil {
			b.Fatal(err)
		}
		for _, o := range invs {
			src.OnAdd(o, true)
		}
		if len(s.Sorted("")) != total || len(s.Sorted("ns-7")) != total/50 {
			b.Fatal("the store does not list every sandbox")
		}
		stored := liveHeap()
		b.ReportMetric(float64(cached-before)/total, "cache-B/sandbox")
		b.ReportMetric(float64(stored-cached)/total, "store-B/sandbox")
		runtime.KeepAlive(invs)
		runtime.KeepAlive(s)
	}
}
