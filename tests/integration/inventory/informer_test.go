// Package inventory_test runs the servers' NodeInventory informer
// (inventory.NewInformer) and the Store over it against a real
// kube-apiserver.
package inventory_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/src/testing/syncbuf"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

const waitTimeout = time.Minute

// inventoryOf is a published NodeInventory of node with n entries.
func inventoryOf(t *testing.T, node string, n int, publishedAt string) *unstructured.Unstructured {
	t.Helper()
	inv := &v1beta1.NodeInventory{Node: node, Address: "127.0.0.1:7000"}
	inv.APIVersion, inv.Kind = v1beta1.SchemeGroupVersion.String(), v1beta1.NodeInventoryKind
	inv.Name = node
	for i := range n {
		id := "sb_" + strings.Repeat("0", 19) + string(rune('a'+i))
		inv.Entries = append(inv.Entries, v1beta1.InventoryEntry{Name: "default/" + node + "-" + string(rune('a'+i)), Phase: v1beta1.SandboxPhaseRunning, ID: id, ClaimRef: "default/" + node + "-" + string(rune('a'+i))})
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(inv)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	// The stamp is set as the publisher wrote it, not as metav1.Time
	// would spell it.
	if err := unstructured.SetNestedField(u.Object, publishedAt, "publishedAt"); err != nil {
		t.Fatal(err)
	}
	return u
}

// The kube-apiserver admits a NodeInventory whose publishedAt is spelled
// in lower case (the CRD's date-time format allows it); the Go type cannot
// read it. That one object must not cost the informer every other node: it is
// logged and skipped, in the first list and in the watch after it.
func TestInformerSkipsAnObjectItCannotRead(t *testing.T) {
	c := cluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*waitTimeout)
	defer cancel()
	if err := c.InstallCRDs(ctx, crds.NodeInventoryYAML); err != nil {
		t.Fatal(err)
	}
	api := c.Dynamic().Resource(v1beta1.NodeInventoryGVR)
	now := func() string { return time.Now().UTC().Format(time.RFC3339) }
	apply := func(u *unstructured.Unstructured) {
		t.Helper()
		cur, err := api.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err == nil {
			u.SetResourceVersion(cur.GetResourceVersion())
			_, err = api.Update(ctx, u, metav1.UpdateOptions{})
		} else {
			_, err = api.Create(ctx, u, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("writing %s: %v", u.GetName(), err)
		}
	}
	apply(inventoryOf(t, "node-good", 1, now()))
	// RFC 3339 allows a lower-case t and z, and so does the CRD's
	// date-time format; metav1.Time does not read them.
	odd := func() string { return strings.ToLower(now()) }
	apply(inventoryOf(t, "node-odd", 1, odd()))

	informer, err := inventory.NewInformer(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	var logs syncbuf.Buffer
	store, err := inventory.New(inventory.Config{Source: informer.SharedIndexInformer(), StaleAfter: time.Hour,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	informer.Start(runCtx.Done())
	wg.Go(func() { store.Run(runCtx) })
	t.Cleanup(func() { stop(); wg.Wait(); informer.Shutdown() })

	entriesOf := func(name string) int {
		n, ok := store.Node(name)
		if !ok {
			return -1
		}
		return n.Entries
	}
	poll.UntilWithin(t, waitTimeout, "the good node listed beside the odd one", func() bool { return store.HasSynced() && entriesOf("node-good") == 1 })
	if _, ok := store.Node("node-odd"); ok {
		t.Error("the node whose stamp cannot be read is in the store")
	}
	if !strings.Contains(logs.String(), "node-odd") {
		t.Errorf("nothing logged about node-odd; the log:\n%s", logs.String())
	}

	// The watch carries on past the odd object's events.
	apply(inventoryOf(t, "node-good", 2, now()))
	poll.UntilWithin(t, waitTimeout, "the good node's update through the watch", func() bool { return entriesOf("node-good") == 2 })
	apply(inventoryOf(t, "node-odd", 2, odd()))
	apply(inventoryOf(t, "node-good", 3, now()))
	poll.UntilWithin(t, waitTimeout, "the good node's update after the odd one's", func() bool { return entriesOf("node-good") == 3 })
	if _, ok := store.Node("node-odd"); ok {
		t.Error("the odd node reached the store through the watch")
	}
}
