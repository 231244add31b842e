package mesh

import (
	"errors"
	"strings"
)

// claimRef is the claim reference a sandbox is recorded under:
// "<namespace>/<name>", the same spelling the aggregated apiserver uses,
// so a sandbox claimed through either front shows in the same namespace.
func claimRef(namespace, name string) (string, error) {
	if namespace == "" || strings.Contains(namespace, "/") {
		return "", errors.New("mesh: namespace must be non-empty and contain no '/'")
	}
	if name == "" {
		return "", errors.New("mesh: claim name must be non-empty")
	}
	return namespace + "/" + name, nil
}

// splitClaimRef parses a claim reference; ok is false for a sandbox that
// was claimed without one (or with a reference no front wrote), which
// belongs to no namespace.
func splitClaimRef(ref string) (namespace, name string, ok bool) {
	namespace, name, ok = strings.Cut(ref, "/")
	if !ok || namespace == "" || name == "" {
		return "", "", false
	}
	return namespace, name, true
}
