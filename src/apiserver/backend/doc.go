// Package backend serves the Sandbox API from the fleet: Service reads
// sandboxes from the inventory view (package inventory) and claims,
// releases, hibernates, wakes, forks and checkpoints them on their nodes'
// sandboxd. It implements the registry's sandbox.Backend; the REST storage
// owns the Kubernetes request semantics, this package owns the fleet.
//
// Reads are eventually consistent: a node publishes its inventory every
// publish interval, so a sandbox this replica just created, paused or
// deleted would look unchanged until then. The Service therefore keeps a
// small overlay of its own recent writes, shown on top of the inventory
// until the inventory agrees or the overlay expires (Config.RecentTTL).
// Another replica does not see this replica's overlay and catches up when
// the node publishes. docs/sandbox-apiserver.md describes the mapping of a
// Sandbox onto a pool key and a lease.
package backend
