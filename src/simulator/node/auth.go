package node

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
	"sync"
)

// callerKind is who presented the request's bearer token.
type callerKind int

const (
	callerNone   callerKind = iota // unknown or missing token on a node with a root token
	callerOpen                     // any caller of a node without a root token
	callerRoot                     // the configured api_token
	callerTenant                   // a configured tenant token
)

type caller struct {
	kind   callerKind
	tenant string // set for callerTenant
}

// operator reports whether the caller may use root-only surfaces.
func (c caller) operator() bool { return c.kind == callerRoot || c.kind == callerOpen }

// tenantName is what the caller's claims are stamped with ("" for root).
func (c caller) tenantName() string {
	if c.kind == callerTenant {
		return c.tenant
	}
	return ""
}

type tenantCred struct {
	name        string
	maxClaims   int
	egressClass string
	digest      [sha256.Size]byte
}

// credentials compares presented tokens in constant time. Tokens are kept
// only as SHA-256 digests so a compare leaks neither content nor length.
// The tenant set changes at runtime (tenants.go); mu guards it, and every
// request reads the set current when it arrives.
type credentials struct {
	hasRoot bool
	root    [sha256.Size]byte

	mu      sync.RWMutex
	tenants []tenantCred
}

func newCredentials(rootToken string, tenants []Tenant) *credentials {
	c := &credentials{}
	if rootToken != "" {
		c.hasRoot = true
		c.root = sha256.Sum256([]byte(rootToken))
	}
	for _, t := range tenants {
		c.tenants = append(c.tenants, tenantCred{name: t.Name, maxClaims: t.MaxClaims, egressClass: t.EgressClass, digest: sha256.Sum256([]byte(t.Token))})
	}
	return c
}

// isRoot reports whether token is the configured api_token.
func (c *credentials) isRoot(token string) bool {
	if !c.hasRoot || token == "" {
		return false
	}
	d := sha256.Sum256([]byte(token))
	return subtle.ConstantTimeCompare(d[:], c.root[:]) == 1
}

// identify classifies a node-level bearer token.
func (c *credentials) identify(token string) caller {
	if c.isRoot(token) {
		return caller{kind: callerRoot}
	}
	if token != "" {
		d := sha256.Sum256([]byte(token))
		c.mu.RLock()
		match := -1
		for i := range c.tenants {
			// Compare against every tenant so timing does not say which.
			if subtle.ConstantTimeCompare(d[:], c.tenants[i].digest[:]) == 1 {
				match = i
			}
		}
		var name string
		if match >= 0 {
			name = c.tenants[match].name
		}
		c.mu.RUnlock()
		if match >= 0 {
			return caller{kind: callerTenant, tenant: name}
		}
	}
	if !c.hasRoot {
		return caller{kind: callerOpen}
	}
	return caller{kind: callerNone}
}

func (c *credentials) tenantMax(name string) int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	for _, t := range c.tenants {
		if t.name == name {
			return t.maxClaims
		}
	}
	return 0
}

// tokenEqual compares a presented sandbox token with the stored one in
// constant time.
func tokenEqual(presented, stored string) bool {
	if presented == "" || stored == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(presented), []byte(stored)) == 1
}

// bearerToken extracts the Authorization: Bearer token, or "".
func bearerToken(r *http.Request) string {
	h := r.Header.Get("Authorization")
	const prefix = "bearer "
	if len(h) < len(prefix) || !strings.EqualFold(h[:len(prefix)], prefix) {
		return ""
	}
	return strings.TrimSpace(h[len(prefix):])
}
