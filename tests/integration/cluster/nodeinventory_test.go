package cluster_test

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// testNodeInventoryPublisher installs the chart's NodeInventory CRD and
// publishes through the simulator's publisher: the inventory must survive
// the CRD's structural schema (pruning drops unknown or misnamed fields),
// a later apply must replace the lists wholesale, and the schema's
// validation must refuse what the API forbids.
func testNodeInventoryPublisher(t *testing.T, c *cluster.Cluster) {
	ctx := testContext(t)
	if err := c.InstallCRDs(ctx, crds.NodeInventoryYAML); err != nil {
		t.Fatal(err)
	}

	// Whole seconds: metav1.Time travels as RFC 3339 without fractions.
	published := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	clock := clocktesting.NewFakeClock(published)
	deadline := metav1.NewTime(published.Add(time.Hour))
	claimed := metav1.NewTime(published.Add(-time.Minute))
	want := &v1beta1.NodeInventory{
		Node:    "node-a",
		Address: "127.0.0.1:7070",
		Pools: []v1beta1.PoolCapacity{
			{Template: "base", Net: "none", Size: "small", Warm: 2, Target: 3},
			{Template: "python", Net: "egress", Size: "large", Warm: 0, Target: 1},
		},
		Entries: []v1beta1.InventoryEntry{
			// Out of order on purpose: the publisher sorts by name.
			{Name: "team-b/sb-2", Phase: v1beta1.SandboxPhaseHibernated, ID: "sb_2", ClaimRef: "team-b/sb-2", Template: "python", Deadline: &deadline},
			{Name: "sb_1", Phase: v1beta1.SandboxPhaseRunning, ID: "sb_1", Addr: "127.0.0.1:7071", Template: "base", ClaimedAt: &claimed},
		},
	}
	current := want
	pub, err := publisher.New(publisher.Config{
		Client: c.Dynamic(),
		Source: func(context.Context) (*v1beta1.NodeInventory, error) { return current.DeepCopy(), nil },
		Clock:  clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := pub.PublishOnce(ctx); err != nil {
		t.Fatalf("publish: %v", err)
	}

	got := getInventory(ctx, t, c.Dynamic(), "node-a")
	if got.Node != "node-a" || got.Address != want.Address {
		t.Errorf("node/address = %q/%q, want node-a/%q", got.Node, got.Address, want.Address)
	}
	if got.PublishedAt == nil || !got.PublishedAt.Time.Equal(published) {
		t.Errorf("publishedAt = %v, want %v", got.PublishedAt, published)
	}
	if !jsonEqual(t, got.Pools, want.Pools) {
		t.Errorf("pools round-tripped as %+v, want %+v", got.Pools, want.Pools)
	}
	sorted := slices.Clone(want.Entries)
	sorted[0], sorted[1] = sorted[1], sorted[0]
	if !jsonEqual(t, got.Entries, sorted) {
		t.Errorf("entries round-tripped as %s, want %s", mustJSON(t, got.Entries), mustJSON(t, sorted))
	}

	// The next publish replaces the lists: an entry the node no longer
	// holds disappears, and publishedAt moves on.
	clock.Step(30 * time.Second)
	current = want.DeepCopy()
	current.Entries = current.Entries[1:]
	current.Pools[0].Warm = 3
	if err := pub.PublishOnce(ctx); err != nil {
		t.Fatalf("second publish: %v", err)
	}
	got = getInventory(ctx, t, c.Dynamic(), "node-a")
	if len(got.Entries) != 1 || got.Entries[0].Name != "sb_1" {
		t.Errorf("after the second publish entries = %s, want only sb_1", mustJSON(t, got.Entries))
	}
	if len(got.Pools) != 2 || got.Pools[0].Warm != 3 {
		t.Errorf("after the second publish pools = %+v, want base warm=3", got.Pools)
	}
	if got.PublishedAt == nil || !got.PublishedAt.Time.Equal(published.Add(30*time.Second)) {
		t.Errorf("after the second publish publishedAt = %v, want %v", got.PublishedAt, published.Add(30*time.Second))
	}

	// The CRD's validation is live: an entry without a phase is refused,
	// and the stored object is left as it was.
	current = want.DeepCopy()
	current.Entries[0].Phase = ""
	if err := pub.PublishOnce(ctx); !apierrors.IsInvalid(err) {
		t.Errorf("publishing an entry without a phase: err = %v, want Invalid", err)
	}
	if got = getInventory(ctx, t, c.Dynamic(), "node-a"); len(got.Entries) != 1 {
		t.Errorf("a refused publish changed the stored entries to %s", mustJSON(t, got.Entries))
	}

	// RBAC covers the new resource: alice, with no bindings, cannot read it.
	alice, err := dynamic.NewForConfig(c.UserConfig(cluster.UnprivilegedUser))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Resource(v1beta1.NodeInventoryGVR).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("alice lists NodeInventories: err = %v, want Forbidden", err)
	}

	if err := pub.Delete(ctx); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, err := c.Dynamic().Resource(v1beta1.NodeInventoryGVR).Get(ctx, "node-a", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("after Delete get: err = %v, want NotFound", err)
	}
}

func getInventory(ctx context.Context, t *testing.T, client dynamic.Interface, name string) *v1beta1.NodeInventory {
	t.Helper()
	u, err := client.Resource(v1beta1.NodeInventoryGVR).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get NodeInventory %s: %v", name, err)
	}
	var inv v1beta1.NodeInventory
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &inv, true); err != nil {
		t.Fatalf("NodeInventory %s does not decode strictly: %v", name, err)
	}
	return &inv
}

func jsonEqual(t *testing.T, a, b any) bool {
	t.Helper()
	return string(mustJSON(t, a)) == string(mustJSON(t, b))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
