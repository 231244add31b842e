package inventory

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
)

// Compact is the transform (cache.TransformFunc) a NodeInventory informer
// runs before it caches an object: it holds what the Store reads and
// nothing else.
//
// The informer's cache keeps every node's last object for the life of the
// process, and a dynamic informer keeps it as nested maps: some 1.5 KB per
// sandbox entry, and as much again in managedFields, where server-side
// apply records one field set per entry. At 50 000 sandboxes that was most
// of the server's resident set (docs/performance.md). The typed object
// without managedFields is a fraction of it.
//
// An object that does not convert is passed on unchanged, so the Store
// logs and skips that one object instead of the informer failing its
// whole list.
func Compact(obj any) (any, error) {
	switch o := obj.(type) {
	case *unstructured.Unstructured:
		var inv v1beta1.NodeInventory
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &inv); err != nil {
			return obj, nil
		}
		inv.ManagedFields = nil
		return &inv, nil
	case *v1beta1.NodeInventory:
		o.ManagedFields = nil
		return o, nil
	default:
		return obj, nil
	}
}
