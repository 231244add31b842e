// Package namehold makes a Sandbox name one sandbox across sandbox-apiserver
// replicas.
//
// The apiserver stores no Sandbox objects, and sandboxd has no
// compare-and-set, so two replicas that take a create of the same
// namespace/name at the same moment would each claim a VM. Before it claims,
// a replica therefore takes a hold on the name, and the hold is written with
// the one compare-and-set the deployment has: a resourceVersion-guarded
// update of a Kubernetes object. Names hash into a fixed set of Shards
// ConfigMaps in the replicas' namespace; each shard is written by one
// goroutine per replica, which folds every hold, renewal and release queued
// while its previous write was in flight into the next write. Writes
// therefore grow with the number of shards and the write latency, not with
// the number of sandboxes.
//
// A hold lives TTL past its last renewal. The replica that took it renews it
// while its create is unconfirmed: in flight, or claimed but not yet
// published in the NodeInventory every replica reads. Once the inventory
// shows the sandbox, the inventory itself answers AlreadyExists, and the
// hold is left to expire. A replica that dies mid-create stops renewing, so
// its holds free their names within TTL.
package namehold
