package apiserver_test

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// Synthetic inventory for the benchmarks: sandboxes that nodes report but
// that no simulated VM backs, so 10 000 of them cost no claims.
const (
	syntheticNamespace = "bench-inventory"
	// syntheticPerNode is how many entries one synthetic node publishes:
	// a dense host's worth, and an object well under etcd's request limit.
	syntheticPerNode = 250
	// syntheticLead is how far ahead of now the synthetic nodes stamp
	// publishedAt. The freshness rule measures age against
	// min(newest stamp, now), so a stamp ahead of now keeps a node fresh
	// without republishing (and makes no other node look old); republishing
	// 10 000 entries every second would load the machine the benchmark
	// measures.
	syntheticLead = 30 * time.Minute
)

// inventoryLevels are the inventory sizes the benchmarks run at.
var inventoryLevels = []int{1, 1000, 10000}

// syntheticInventory is a set of published synthetic nodes.
type syntheticInventory struct {
	publishers []*publisher.Publisher
}

// publishSynthetic publishes n synthetic entries in syntheticNamespace on
// ceil(n/syntheticPerNode) nodes with no pools (so no claim is ever sent
// to them), then waits until the server lists all of them.
func publishSynthetic(ctx context.Context, b testing.TB, e *testEnv, n int) *syntheticInventory {
	b.Helper()
	now := time.Now()
	clock := testingclock.NewFakeClock(now.Add(syntheticLead))
	deadline := metav1.NewTime(now.Add(time.Hour))
	claimed := metav1.NewTime(now)
	s := &syntheticInventory{}
	for first := 0; first < n; first += syntheticPerNode {
		name := fmt.Sprintf("bench-node-%03d", first/syntheticPerNode)
		inv := &v1beta1.NodeInventory{Node: name, Address: "127.0.0.1:1"}
		for i := first; i < min(first+syntheticPerNode, n); i++ {
			ref := syntheticNamespace + "/sb-" + strconv.Itoa(i)
			inv.Entries = append(inv.Entries, v1beta1.InventoryEntry{
				Name: ref, ClaimRef: ref, Phase: v1beta1.SandboxPhaseRunning,
				ID:       fmt.Sprintf("sb_%020x", i),
				Addr:     inv.Address,
				Template: templateBase,
				Deadline: &deadline, ClaimedAt: &claimed,
			})
		}
		pub, err := publisher.New(publisher.Config{
			Client: e.cluster.Dynamic(),
			Source: func(context.Context) (*v1beta1.NodeInventory, error) { return inv, nil },
			Clock:  clock,
		})
		if err != nil {
			b.Fatal(err)
		}
		if err := pub.PublishOnce(ctx); err != nil {
			b.Fatalf("publish %s: %v", name, err)
		}
		s.publishers = append(s.publishers, pub)
	}
	waitListed(ctx, b, e, n)
	// The waits decoded large lists; collect them now rather than in the
	// middle of the measurement.
	runtime.GC()
	return s
}

// remove deletes the synthetic nodes and waits until the server lists
// none of their entries.
func (s *syntheticInventory) remove(ctx context.Context, b testing.TB, e *testEnv) {
	b.Helper()
	for _, p := range s.publishers {
		if err := p.Delete(ctx); err != nil {
			b.Errorf("delete synthetic inventory: %v", err)
		}
	}
	waitListed(ctx, b, e, 0)
}

// waitListed waits until the server lists n sandboxes in
// syntheticNamespace.
func waitListed(ctx context.Context, b testing.TB, e *testEnv, n int) {
	b.Helper()
	poll.UntilNil(b, fmt.Sprintf("the server to list %d synthetic sandboxes", n), func() error {
		list, err := e.sandboxes.Namespace(syntheticNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatalf("list the synthetic sandboxes: %v", err)
		}
		if got := len(list.Items); got != n {
			return fmt.Errorf("%d listed", got)
		}
		return nil
	})
}

// benchContext bounds a benchmark's setup and run; a 10 000-entry list
// takes a good fraction of a second on a small machine.
func benchContext(b *testing.B) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	b.Cleanup(cancel)
	return ctx
}

// BenchmarkListThroughKubeAPIServer lists sandboxes in all namespaces
// through the aggregator with the dynamic client (JSON, decoded into
// unstructured objects), as kubectl get sandboxes -A does, at each
// inventory size.
func BenchmarkListThroughKubeAPIServer(b *testing.B) {
	e := sharedEnv(b)
	ctx := benchContext(b)
	for _, n := range inventoryLevels {
		inv := publishSynthetic(ctx, b, e, n)
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				list, err := e.sandboxes.List(ctx, metav1.ListOptions{})
				if err != nil {
					b.Fatal(err)
				}
				if len(list.Items) < n {
					b.Fatalf("listed %d sandboxes, want at least %d", len(list.Items), n)
				}
			}
		})
		inv.remove(ctx, b, e)
	}
}

// BenchmarkClaimThroughKubeAPIServer creates a sandbox through the
// aggregator (a warm claim on a simulated node, answered once the node
// granted it) at each inventory size. Each created sandbox is deleted with
// the timer stopped, so the fleet never runs out of capacity.
func BenchmarkClaimThroughKubeAPIServer(b *testing.B) {
	e := sharedEnv(b)
	ctx := benchContext(b)
	const ns = "bench-claim"
	seq := 0
	for _, n := range inventoryLevels {
		inv := publishSynthetic(ctx, b, e, n)
		b.Run("entries="+strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				seq++
				name := "claim-" + strconv.Itoa(seq)
				u := toUnstructured(b, newSandbox(ns, name, withTemplate(templateBase)))
				if _, err := e.sandboxes.Namespace(ns).Create(ctx, u, metav1.CreateOptions{}); err != nil {
					b.Fatalf("create %s: %v", name, err)
				}
				b.StopTimer()
				if err := e.sandboxes.Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					b.Fatalf("delete %s: %v", name, err)
				}
				b.StartTimer()
			}
		})
		inv.remove(ctx, b, e)
	}
}
