package sandbox

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ClaimRef is the reference a sandbox is claimed under on its node: the
// namespace and name the sandbox has in the Sandbox API, written on the
// wire as "<namespace>/<name>" (sandboxd's claim_ref). Both fronts claim
// under it, so a sandbox made through either shows in the same namespace
// under the same name through both.
type ClaimRef struct {
	Namespace, Name string
}

// NewClaimRef validates a namespace (a DNS-1123 label) and a name (a
// DNS-1123 subdomain) as a claim reference a front may claim under.
func NewClaimRef(namespace, name string) (ClaimRef, error) {
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return ClaimRef{}, fmt.Errorf("invalid namespace %q: %s", namespace, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return ClaimRef{}, fmt.Errorf("invalid name %q: %s", name, strings.Join(errs, "; "))
	}
	return ClaimRef{Namespace: namespace, Name: name}, nil
}

// ParseClaimRef reads a claim_ref a node reports. The name is shown with
// every underscore turned into a hyphen: sandboxd records a fork child
// under prefix+id ("team/web-fork-sb_0a1b"), and the hyphenated spelling
// ("web-fork-sb-0a1b") is the one every client can address. A front never
// claims under a name with an underscore, so only such children change.
// ok is false for a reference no front wrote, which places the sandbox in
// no namespace at all.
func ParseClaimRef(s string) (ref ClaimRef, ok bool) {
	ns, name, found := strings.Cut(s, "/")
	if !found {
		return ClaimRef{}, false
	}
	ref, err := NewClaimRef(ns, strings.ReplaceAll(name, "_", "-"))
	return ref, err == nil
}

// String is the wire spelling, "<namespace>/<name>".
func (r ClaimRef) String() string { return r.Namespace + "/" + r.Name }

// IsZero reports whether r is the reference of a sandbox in no namespace.
func (r ClaimRef) IsZero() bool { return r == ClaimRef{} }
