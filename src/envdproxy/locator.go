package envdproxy

// Locator is the proxy's view of where sandboxes live. sandbox-envd-proxy
// implements it over the NodeInventory informer (with the shared
// --inventory-stale-after rule); sandbox-e2b over its sandboxd mesh.
type Locator interface {
	// Owner returns the sandboxd host:port of the node that lists id
	// (canonical sb_… spelling) in the fresh view, filtered to the
	// proxy's namespace; ok is false when the view does not list it.
	Owner(id string) (addr string, ok bool)
	// Nodes returns every live node's sandboxd host:port, the nodes asked
	// (within the unknown-id budget) about an id Owner does not list.
	Nodes() []string
}
