// Package inventorytest runs an inventory.Store over a fake dynamic client
// and a real client-go informer, so tests of anything that reads inventory
// exercise the same event path a cluster drives: publish an object, the
// informer delivers it, the store indexes it.
package inventorytest

import (
	"context"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// Harness is a running store fed by a fake apiserver.
type Harness struct {
	T      testing.TB
	Client *dynamicfake.FakeDynamicClient
	Store  *inventory.Store
}

// Options tune the harness's store.
type Options struct {
	StaleAfter time.Duration
	Resync     time.Duration
	Clock      clock.WithTicker
	// BeforeRun runs after the store is built and before its informer and
	// Run start, e.g. to subscribe.
	BeforeRun func(*inventory.Store)
}

// Start builds the client, informer and store and runs them until the test
// ends, waiting for the informer's initial sync.
func Start(t testing.TB, opts Options) *Harness {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1beta1.NodeInventoryGVR: v1beta1.NodeInventoryListKind})
	factory := dynamicinformer.NewDynamicSharedInformerFactory(client, 0)
	informer := factory.ForResource(v1beta1.NodeInventoryGVR).Informer()
	// As the binaries do, so the store reads what they cache.
	if err := informer.SetTransform(inventory.Compact); err != nil {
		t.Fatal(err)
	}
	store, err := inventory.New(inventory.Config{
		Source: informer, StaleAfter: opts.StaleAfter, Resync: opts.Resync, Clock: opts.Clock,
	})
	if err != nil {
		t.Fatal(err)
	}
	if opts.BeforeRun != nil {
		opts.BeforeRun(store)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); store.Run(ctx) }()
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
		<-done
	})
	if !cache.WaitForCacheSync(ctx.Done(), informer.HasSynced, store.HasSynced) {
		t.Fatal("inventory informer did not sync")
	}
	return &Harness{T: t, Client: client, Store: store}
}

// Publish creates or replaces inv, as a publisher's apply would.
func (h *Harness) Publish(inv *v1beta1.NodeInventory) {
	h.T.Helper()
	u := ToUnstructured(h.T, inv)
	res := h.Client.Resource(v1beta1.NodeInventoryGVR)
	ctx := context.Background()
	if _, err := res.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		if !apierrors.IsNotFound(err) {
			h.T.Fatalf("update inventory %s: %v", inv.Name, err)
		}
		if _, err := res.Create(ctx, u, metav1.CreateOptions{}); err != nil {
			h.T.Fatalf("create inventory %s: %v", inv.Name, err)
		}
	}
}

// Delete removes a node's inventory object.
func (h *Harness) Delete(name string) {
	h.T.Helper()
	if err := h.Client.Resource(v1beta1.NodeInventoryGVR).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		h.T.Fatalf("delete inventory %s: %v", name, err)
	}
}

// Eventually polls cond until it holds or a generous deadline passes.
func (h *Harness) Eventually(what string, cond func() bool) {
	h.T.Helper()
	Eventually(h.T, what, cond)
}

// Eventually polls cond until it holds or a generous deadline passes.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, cond)
}

// ToUnstructured renders inv as the apiserver would serve it.
func ToUnstructured(t testing.TB, inv *v1beta1.NodeInventory) *unstructured.Unstructured {
	t.Helper()
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(inv)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion(v1beta1.SchemeGroupVersion.String())
	u.SetKind(v1beta1.NodeInventoryKind)
	return u
}

// FromSnapshot builds the NodeInventory a publisher would apply for a
// simulated node's snapshot, stamped publishedAt (zero leaves it unset).
func FromSnapshot(s node.Snapshot, publishedAt time.Time) *v1beta1.NodeInventory {
	inv := publisher.FromSnapshot(s)
	if !publishedAt.IsZero() {
		t := metav1.NewTime(publishedAt)
		inv.PublishedAt = &t
	}
	return inv
}
