package backend

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
)

// benchService serves total sandboxes spread over 20 nodes and 50
// namespaces.
func benchService(b *testing.B, total int) *Service {
	b.Helper()
	h := inventorytest.Start(b, inventorytest.Options{})
	svc, err := New(Config{Inventory: h.Store})
	if err != nil {
		b.Fatal(err)
	}
	const nodes = 20
	for n := range nodes {
		var entries []v1beta1.InventoryEntry
		for i := n; i < total; i += nodes {
			entries = append(entries, invEntry(fmt.Sprintf("ns-%d/sb-%d", i%50, i), fmt.Sprintf("sb_%08x", i), v1beta1.SandboxPhaseRunning))
		}
		h.Publish(nodeInv(fmt.Sprintf("node-%d", n), t0, entries...))
	}
	h.Eventually("every sandbox served", func() bool { l, _, _ := svc.List(context.Background(), ""); return len(l) == total })
	return svc
}

func BenchmarkList(b *testing.B) {
	ctx := context.Background()
	for _, total := range []int{1000, 10000} {
		for _, ns := range []string{"", "ns-7"} {
			b.Run(fmt.Sprintf("%d/ns=%q", total, ns), func(b *testing.B) {
				svc := benchService(b, total)
				b.ReportAllocs()
				for b.Loop() {
					if l, _, _ := svc.List(ctx, ns); len(l) == 0 {
						b.Fatal("empty list")
					}
				}
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	ctx := context.Background()
	svc := benchService(b, 10000)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		n := i % 10000
		if _, err := svc.Get(ctx, fmt.Sprintf("ns-%d", n%50), fmt.Sprintf("sb-%d", n)); err != nil {
			b.Fatal(err)
		}
		i++
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

// BenchmarkHeldMemory measures, at 50 000 sandboxes over 20 nodes, what
// the Service holds over the inventory ("service-B/sandbox": what watchers
// were shown, for diffs and resourceVersions) and what one unpaged list
// materializes ("list-B/sandbox": the Sandbox objects before encoding). A
// page of 500 materializes 500 of them.
func BenchmarkHeldMemory(b *testing.B) {
	const total, nodes = 50000, 20
	h := inventorytest.Start(b, inventorytest.Options{})
	for n := range nodes {
		var entries []v1beta1.InventoryEntry
		for i := n; i < total; i += nodes {
			entries = append(entries, invEntry(fmt.Sprintf("ns-%d/sb-%d", i%50, i), fmt.Sprintf("sb_%08x", i), v1beta1.SandboxPhaseRunning))
		}
		h.Publish(nodeInv(fmt.Sprintf("node-%d", n), t0, entries...))
	}
	h.Eventually("every sandbox in the store", func() bool { return len(h.Store.Sorted("")) == total })
	for b.Loop() {
		before := liveHeap()
		svc, err := New(Config{Inventory: h.Store})
		if err != nil {
			b.Fatal(err)
		}
		built := liveHeap()
		items, _, _ := svc.List(context.Background(), "")
		if len(items) != total {
			b.Fatalf("listed %d", len(items))
		}
		listed := liveHeap()
		b.ReportMetric(float64(built-before)/total, "service-B/sandbox")
		b.ReportMetric(float64(listed-built)/total, "list-B/sandbox")
		runtime.KeepAlive(items)
		svc.unsubscribe()
	}
}
