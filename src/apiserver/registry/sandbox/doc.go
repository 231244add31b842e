// Package sandbox is the REST storage of sandboxes.agents.x-k8s.io/v1beta1
// and its pause, resume, fork and snapshot subresources.
//
// Nothing is stored here. Every verb is answered by a Backend, which reads
// the fleet's published inventory and calls the owning node; this package
// owns only the Kubernetes REST semantics on top: request namespaces, field
// and label selection, resource versions, watch framing, tables and the
// validation of what a client sends (a fork's count is checked against
// sandbox.MaxForkCount here, answered 422). The Sandbox service
// (*sandboxes.Service) is the Backend, and the watch revision, event and
// snapshot types the interface names are that package's: the registry
// imports the service, never the other way round.
package sandbox
