package inventory_test

import (
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
)

// BenchmarkDecodePublish decodes one node's published NodeInventory, as
// a watch event carries it, into what the informer caches: through
// unstructured maps as a dynamic informer does, and straight into the
// typed object as inventory.NewInformer's client does. Every node
// republishes its whole object each period, so this runs once a period
// per node, for every sandbox the node holds.
//
//	go test -run XXX -bench DecodePublish ./src/inventory/
func BenchmarkDecodePublish(b *testing.B) {
	scheme := runtime.NewScheme()
	if err := v1beta1.AddToScheme(scheme); err != nil {
		b.Fatal(err)
	}
	typed := serializer.NewCodecFactory(scheme).UniversalDeserializer()
	for _, n := range []int{15, 250} {
		raw := publishedJSON(b, n)
		b.Run(fmt.Sprintf("dynamic/%d-entries", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				u := &unstructured.Unstructured{}
				if _, _, err := unstructured.UnstructuredJSONScheme.Decode(raw, nil, u); err != nil {
					b.Fatal(err)
				}
				if _, ok := mustCompact(b, u).(*v1beta1.NodeInventory); !ok {
					b.Fatal("not compacted to a typed object")
				}
			}
		})
		b.Run(fmt.Sprintf("typed/%d-entries", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				obj, _, err := typed.Decode(raw, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if got := mustCompact(b, obj).(*v1beta1.NodeInventory); len(got.Entries) != n {
					b.Fatalf("%d entries decoded, want %d", len(got.Entries), n)
				}
			}
		})
	}
}

func mustCompact(b *testing.B, obj any) any {
	b.Helper()
	out, err := inventory.Compact(obj)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

// publishedJSON is a node's NodeInventory with n entries as the
// kube-apiserver serves it after a server-side apply.
func publishedJSON(b *testing.B, n int) []byte {
	b.Helper()
	var entries []v1beta1.InventoryEntry
	for i := range n {
		entries = append(entries, entry(fmt.Sprintf("ns-%d/sb-%d", i%50, i), fmt.Sprintf("sb_%020x", i), v1beta1.SandboxPhaseRunning))
	}
	obj := inv("node-0", t0, entries...)
	obj.APIVersion, obj.Kind = v1beta1.SchemeGroupVersion.String(), v1beta1.NodeInventoryKind
	obj.UID, obj.ResourceVersion, obj.Generation = "3f1c2b9e-5d7a-4c1e-9b2f-0a6d8e4c7b31", "123456", 1
	obj.CreationTimestamp = metav1.NewTime(t0)
	obj.ManagedFields = []metav1.ManagedFieldsEntry{{
		Manager: "vk-sandbox", Operation: metav1.ManagedFieldsOperationApply, APIVersion: obj.APIVersion,
		Time: &obj.CreationTimestamp, FieldsType: "FieldsV1",
		FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:address":{},"f:entries":{},"f:node":{},"f:pools":{},"f:publishedAt":{}}`)},
	}}
	raw, err := json.Marshal(obj)
	if err != nil {
		b.Fatal(err)
	}
	return raw
}
