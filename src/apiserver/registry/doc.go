// Package registry is the REST storage of sandboxes.agents.x-k8s.io/v1beta1
// and its pause, resume, fork and snapshot subresources.
//
// Nothing is stored here. Every verb is answered by a Backend, which reads
// the fleet's published inventory and calls the owning node; this package
// owns only the Kubernetes REST semantics on top: request namespaces, field
// and label selection, resource versions, watch framing, tables and the
// validation of what a client sends (a fork's count is checked against
// sandbox.MaxForkCount here, answered 422). The Backend interface and the
// words it speaks (revisions, events, list pages, snapshot results) are
// defined here, in the registry's own terms; the Sandbox service
// (package backend) implements them and imports this package, never the
// other way round.
package registry
