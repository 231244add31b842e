// Package v1beta1 holds the sandbox.cocoonstack.io/v1beta1 API: the
// NodeInventory object each sandbox node publishes so that the control plane
// can serve and route sandboxes without storing one object per sandbox.
//
// The CRD and deepcopy functions are generated from these types by
// tools/codegen.sh; drift tests in this package fail when the checked-in
// outputs no longer match the types.
//
// +kubebuilder:object:generate=true
// +groupName=sandbox.cocoonstack.io
package v1beta1

//go:generate bash ../../../../tools/codegen.sh
