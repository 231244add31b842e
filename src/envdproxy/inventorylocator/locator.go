// Package inventorylocator implements envdproxy.Locator over the
// NodeInventory informer's store, so a data-plane request never becomes a
// read against the kube-apiserver.
package inventorylocator

import (
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
)

// Locator answers from the fresh inventory view (the store applies the
// shared --inventory-stale-after rule).
type Locator struct {
	store     *inventory.Store
	namespace string
}

var _ envdproxy.Locator = (*Locator)(nil)

// New returns a Locator over store. A non-empty namespace keeps Owner to
// sandboxes claimed in it; "" matches every sandbox, including one claimed
// without a reference. The namespace is a lookup filter, not an access
// boundary: the proxy still reaches a sandbox outside it by asking the
// nodes, for a caller that holds its token.
func New(store *inventory.Store, namespace string) *Locator {
	return &Locator{store: store, namespace: namespace}
}

// Owner returns the sandboxd address of the node that lists id.
func (l *Locator) Owner(id string) (string, bool) {
	e, ok := l.store.ByID(id, l.namespace)
	if !ok || e.Address == "" {
		return "", false
	}
	return e.Address, true
}

// Nodes returns every fresh node's sandboxd address; a node that publishes
// none takes no traffic and is left out.
func (l *Locator) Nodes() []string {
	nodes := l.store.Nodes()
	out := make([]string, 0, len(nodes))
	for _, n := range nodes {
		if n.Address != "" {
			out = append(out, n.Address)
		}
	}
	return out
}
