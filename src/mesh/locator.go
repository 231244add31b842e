package mesh

import (
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Locator is the envd proxy's view of the same mesh.
type Locator struct {
	m         *Mesh
	namespace string
}

// Locator returns the envdproxy.Locator over this view. Owner answers
// only for sandboxes whose claim reference is in namespace ("" is every
// namespace); like the Kubernetes proxy's filter it routes, it does not
// authorize (the envd access token does).
func (m *Mesh) Locator(namespace string) *Locator {
	return &Locator{m: m, namespace: namespace}
}

// Owner implements envdproxy.Locator from the index the last refresh,
// claims and lookups built. A sandbox the view has not seen yet is not
// listed; the proxy then asks Nodes.
func (l *Locator) Owner(id string) (string, bool) {
	l.m.mu.RLock()
	defer l.m.mu.RUnlock()
	e, ok := l.m.index[id]
	if !ok {
		return "", false
	}
	if n := l.m.nodes[e.addr]; n == nil || !n.live {
		return "", false
	}
	if l.namespace != "" {
		if ref, ok := sandbox.ParseClaimRef(e.claimRef); !ok || ref.Namespace != l.namespace {
			return "", false
		}
	}
	return e.addr, true
}

// Nodes implements envdproxy.Locator: every live node.
func (l *Locator) Nodes() []string { return l.m.LiveNodes() }
