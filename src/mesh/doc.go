// Package mesh is sandbox-e2b's view of a sandboxd mesh, built without
// Kubernetes: it starts from a few seed node addresses, learns the other
// members from the nodes' own gossip (GET /v1/peers), reads each member's
// pools and warm counts (GET /v1/info) and sandbox index (GET
// /v1/sandboxes), and refreshes all of it on an interval.
//
// A node that stops answering leaves the view at once (on the failed
// refresh or the first failed call) and comes back when it answers again;
// seeds are retried forever, learned members until they have been silent
// and unnamed by every peer for Config.ForgetAfter.
//
// *Mesh is a fleet.View (the nodes and their warm counts, lists and
// lookups across every node) and a fleet.Recorder; the fleet core makes
// the claims and runs the verbs over it. Mesh.Locator returns the
// envdproxy.Locator of the same view. Sandboxes
// are scoped to namespaces by their claim reference, "<namespace>/<name>",
// exactly as the Kubernetes front records them.
package mesh
