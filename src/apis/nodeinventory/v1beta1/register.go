package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

const (
	// GroupName is the API group of every type in this package.
	GroupName = "sandbox.cocoonstack.io"
	// Version is the API version of every type in this package.
	Version = "v1beta1"

	// NodeInventoryKind is the kind of the per-node inventory object.
	NodeInventoryKind = "NodeInventory"
	// NodeInventoryListKind is the kind of a list of NodeInventory objects.
	NodeInventoryListKind = "NodeInventoryList"
	// NodeInventoryResource is the plural resource name NodeInventory is served under.
	NodeInventoryResource = "nodeinventories"
)

var (
	// SchemeGroupVersion is the group and version of this package's types.
	SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: Version}

	// NodeInventoryGVR addresses NodeInventory for dynamic clients and informers.
	NodeInventoryGVR = SchemeGroupVersion.WithResource(NodeInventoryResource)

	// SchemeBuilder collects the functions that register this package's types.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme registers this package's types with a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

// Resource qualifies an unqualified resource name with this package's group,
// as apierrors and RBAC checks expect.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &NodeInventory{}, &NodeInventoryList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
