package inventory

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
)

func TestCompactKeepsWhatTheStoreReads(t *testing.T) {
	deadline := metav1.NewTime(time.Date(2026, 5, 1, 13, 0, 0, 0, time.UTC))
	in := &v1beta1.NodeInventory{
		Node: "node-1", Address: "10.0.0.1:7070",
		Pools: []v1beta1.PoolCapacity{{Template: "base", Warm: 3, Target: 4}},
		Entries: []v1beta1.InventoryEntry{{
			Name: "ns/a", ClaimRef: "ns/a", ID: "sb_0123456789abcdef0123", Phase: v1beta1.SandboxPhaseRunning,
			Template: "base", Deadline: &deadline,
		}},
	}
	in.Name = "node-1"
	in.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "sandboxd", Operation: metav1.ManagedFieldsOperationApply,
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:entries":{}}`)}}}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(in)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Compact(&unstructured.Unstructured{Object: raw})
	if err != nil {
		t.Fatal(err)
	}
	inv, ok := out.(*v1beta1.NodeInventory)
	if !ok {
		t.Fatalf("Compact gives %T, want a typed NodeInventory", out)
	}
	if len(inv.ManagedFields) != 0 {
		t.Error("managedFields kept")
	}
	if inv.Name != "node-1" || inv.Address != in.Address || len(inv.Pools) != 1 || inv.Pools[0].Warm != 3 ||
		len(inv.Entries) != 1 || inv.Entries[0].ID != in.Entries[0].ID || !inv.Entries[0].Deadline.Equal(&deadline) {
		t.Errorf("Compact lost what the store reads: %+v", inv)
	}

	typed := in.DeepCopy()
	if out, _ := Compact(typed); out != typed || len(typed.ManagedFields) != 0 {
		t.Error("a typed object is not compacted in place")
	}
}

func TestCompactPassesOnWhatItCannotRead(t *testing.T) {
	bad := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x"}, "entries": "not a list"}}
	if out, err := Compact(bad); err != nil || out != bad {
		t.Errorf("Compact(unreadable) = %v, %v; want it passed on for the store to skip", out, err)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "x"}
	if out, err := Compact(tomb); err != nil || out != tomb {
		t.Errorf("Compact(tombstone) = %v, %v", out, err)
	}
}
