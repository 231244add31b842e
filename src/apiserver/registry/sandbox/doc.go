// Package sandbox is the REST storage of sandboxes.agents.x-k8s.io/v1beta1
// and its pause, resume, fork and snapshot subresources.
//
// Nothing is stored here. Every verb is answered by a Backend, which reads
// the fleet's published inventory and calls the owning node; this package
// owns only the Kubernetes REST semantics on top: request namespaces, field
// and label selection, resource versions, watch framing, tables and the
// validation of what a client sends.
package sandbox
