package node

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// The tenant API (/v1/tenants) changes the node's tenant set at runtime.
// Config.Tenants (sandboxd-sim's --tenant-tokens-file) is the set a node
// starts with, as if a PUT /v1/tenants had applied it at boot; sandboxd
// itself starts with none and persists the applied set in its data_dir,
// which the simulator, holding everything in memory, does not.

// tenantName is the claim name grammar a tenant name follows.
var tenantName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9._:/-]{0,62}$`)

// Page bounds of GET /v1/tenants.
const (
	defaultTenantPage = 1000
	maxTenantPage     = 10000
)

// errTenantRemoved answers a removed tenant's sandbox token where the
// claim would extend itself (renew, fork).
var errTenantRemoved = &apiError{http.StatusForbidden, "the claim's tenant was removed"}

// checkInitialTenants applies the tenant API's rules to Config.Tenants.
func checkInitialTenants(rootToken string, tenants []Tenant) error {
	tokens := map[string]bool{}
	for _, t := range tenants {
		if !tenantName.MatchString(t.Name) {
			return fmt.Errorf("node: tenant name %q does not match %s", t.Name, tenantName)
		}
		if t.MaxClaims < 0 {
			return fmt.Errorf("node: tenant %q: negative max_claims", t.Name)
		}
		// Never name the token: a log line must not carry it.
		if t.Token == rootToken || tokens[t.Token] {
			return fmt.Errorf("node: tenant %q: its token equals the root token or another tenant's", t.Name)
		}
		tokens[t.Token] = true
	}
	return nil
}

// hasTenant reports whether name is in the current set.
func (c *credentials) hasTenant(name string) bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return slices.ContainsFunc(c.tenants, func(t tenantCred) bool { return t.name == name })
}

// tenantRemovedLocked reports whether sb belongs to a tenant no longer in
// the set. A name added again owns what the removed tenant left.
func (n *Node) tenantRemovedLocked(sb *claimed) bool {
	return sb.tenant != "" && !n.creds.hasTenant(sb.tenant)
}

// updateTenants computes a new tenant set from the current one under the
// write lock, checks it and installs it; the change applies to the next
// request.
func (c *credentials) updateTenants(change func(cur map[string]tenantCred) (map[string]tenantCred, *apiError)) *apiError {
	c.mu.Lock()
	defer c.mu.Unlock()
	cur := make(map[string]tenantCred, len(c.tenants))
	for _, t := range c.tenants {
		cur[t.name] = t
	}
	next, aerr := change(cur)
	if aerr != nil {
		return aerr
	}
	seen := map[[sha256.Size]byte]string{}
	for _, t := range next {
		if other, dup := seen[t.digest]; dup {
			return errorf(http.StatusBadRequest, "tenants %q and %q share a token", min(other, t.name), max(other, t.name))
		}
		seen[t.digest] = t.name
	}
	list := slices.Collect(maps.Values(next))
	slices.SortFunc(list, func(a, b tenantCred) int { return cmp.Compare(a.name, b.name) })
	c.tenants = list
	return nil
}

// tenantCredOf checks one tenant entry and builds its credential; an
// entry without a token keeps the stored tenant's.
func (c *credentials) tenantCredOf(name string, upd sandboxd.TenantUpdate, cur map[string]tenantCred) (tenantCred, *apiError) {
	if !tenantName.MatchString(name) {
		return tenantCred{}, errorf(http.StatusBadRequest, "tenant name %.80q does not match %s", name, tenantName)
	}
	if upd.MaxClaims < 0 {
		return tenantCred{}, errorf(http.StatusBadRequest, "tenant %q: negative max_claims", name)
	}
	if upd.EgressClass != "" && !tenantName.MatchString(upd.EgressClass) {
		return tenantCred{}, errorf(http.StatusBadRequest, "tenant %q: invalid egress_class", name)
	}
	t := tenantCred{name: name, maxClaims: upd.MaxClaims, egressClass: upd.EgressClass}
	switch {
	case upd.Token != "":
		t.digest = sha256.Sum256([]byte(upd.Token))
		if c.hasRoot && t.digest == c.root {
			return tenantCred{}, errorf(http.StatusBadRequest, "tenant %q: the token is the api_token", name)
		}
	case cur[name].name != "":
		t.digest = cur[name].digest
	default:
		return tenantCred{}, errorf(http.StatusBadRequest, "tenant %q: a new tenant needs a token", name)
	}
	return t, nil
}

// tenantAdmin authenticates the tenant API: root only, and only on a node
// with a root token, since tenants are told apart from root by it.
func (n *Node) tenantAdmin(w http.ResponseWriter, r *http.Request) bool {
	if _, ok := n.operatorCaller(w, r); !ok {
		return false
	}
	if !n.creds.hasRoot {
		writeError(w, errorf(http.StatusBadRequest, "tenants need an api_token"))
		return false
	}
	return true
}

// decodeStrict reads a JSON body like decodeBody but refuses unknown
// fields, so a config-owned field or a typo is a 400, not silently dropped.
func decodeStrict(w http.ResponseWriter, r *http.Request, v any) *apiError {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil || len(raw) == 0 {
		return errBadBody
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return errorf(http.StatusBadRequest, "invalid request body: %s", err)
	}
	return nil
}

func (n *Node) handlePutTenant(w http.ResponseWriter, r *http.Request) {
	if !n.tenantAdmin(w, r) {
		return
	}
	name := r.PathValue("name")
	var upd sandboxd.TenantUpdate
	if aerr := decodeStrict(w, r, &upd); aerr != nil {
		writeError(w, aerr)
		return
	}
	respondEmpty(w, n.creds.updateTenants(func(cur map[string]tenantCred) (map[string]tenantCred, *apiError) {
		t, aerr := n.creds.tenantCredOf(name, upd, cur)
		if aerr != nil {
			return nil, aerr
		}
		cur[name] = t
		return cur, nil
	}))
}

func (n *Node) handleDeleteTenant(w http.ResponseWriter, r *http.Request) {
	if !n.tenantAdmin(w, r) {
		return
	}
	name := r.PathValue("name")
	respondEmpty(w, n.creds.updateTenants(func(cur map[string]tenantCred) (map[string]tenantCred, *apiError) {
		if _, ok := cur[name]; !ok {
			return nil, errorf(http.StatusNotFound, "unknown tenant")
		}
		delete(cur, name)
		return cur, nil
	}))
}

func (n *Node) handleReplaceTenants(w http.ResponseWriter, r *http.Request) {
	if !n.tenantAdmin(w, r) {
		return
	}
	var body sandboxd.TenantSet
	if aerr := decodeStrict(w, r, &body); aerr != nil {
		writeError(w, aerr)
		return
	}
	if body.Tenants == nil {
		writeError(w, errorf(http.StatusBadRequest, "tenants must be a list"))
		return
	}
	aerr := n.creds.updateTenants(func(cur map[string]tenantCred) (map[string]tenantCred, *apiError) {
		next := make(map[string]tenantCred, len(body.Tenants))
		for _, e := range body.Tenants {
			if e.Claims != 0 || e.Removed {
				return nil, errorf(http.StatusBadRequest, "tenant %.80q: claims and removed are read-only", e.Name)
			}
			if _, dup := next[e.Name]; dup {
				return nil, errorf(http.StatusBadRequest, "tenant %.80q listed twice", e.Name)
			}
			t, aerr := n.creds.tenantCredOf(e.Name, sandboxd.TenantUpdate{Token: e.Token, MaxClaims: e.MaxClaims, EgressClass: e.EgressClass}, cur)
			if aerr != nil {
				return nil, aerr
			}
			next[e.Name] = t
		}
		return next, nil
	})
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, n.tenantPage("", defaultTenantPage))
}

func (n *Node) handleTenants(w http.ResponseWriter, r *http.Request) {
	if !n.tenantAdmin(w, r) {
		return
	}
	q := r.URL.Query()
	limit := defaultTenantPage
	if v := q.Get("limit"); v != "" {
		l, err := strconv.Atoi(v)
		if err != nil || l < 1 || l > maxTenantPage {
			writeError(w, errorf(http.StatusBadRequest, "limit must be 1-%d", maxTenantPage))
			return
		}
		limit = l
	}
	writeJSON(w, http.StatusOK, n.tenantPage(q.Get("after"), limit))
}

// tenantPage lists up to limit tenants named after after, in name order,
// with their live claims here; the first page also lists the removed
// tenants that still own claims. Tokens are never listed.
func (n *Node) tenantPage(after string, limit int) sandboxd.TenantPage {
	n.creds.mu.RLock()
	set := slices.Clone(n.creds.tenants) // sorted by name
	n.creds.mu.RUnlock()
	n.mu.Lock()
	live := maps.Clone(n.tenantLive)
	n.mu.Unlock()

	page := sandboxd.TenantPage{Tenants: []sandboxd.Tenant{}, Digest: tenantDigest(set)}
	current := map[string]bool{}
	for _, t := range set {
		current[t.name] = true
		if t.name <= after {
			continue
		}
		if len(page.Tenants) == limit {
			page.Next = page.Tenants[limit-1].Name
			break
		}
		page.Tenants = append(page.Tenants, sandboxd.Tenant{Name: t.name, MaxClaims: t.maxClaims, EgressClass: t.egressClass, Claims: live[t.name]})
	}
	if after == "" {
		for _, name := range slices.Sorted(maps.Keys(live)) {
			if !current[name] && live[name] > 0 {
				page.Tenants = append(page.Tenants, sandboxd.Tenant{Name: name, Claims: live[name], Removed: true})
			}
		}
	}
	return page
}

// tenantDigest identifies a tenant set: equal on two nodes exactly when
// they hold the same names, token digests, caps and classes.
func tenantDigest(set []tenantCred) string {
	h := sha256.New()
	for _, t := range set { // sorted by name
		fmt.Fprintf(h, "%s\x00%x\x00%d\x00%s\n", t.name, t.digest, t.maxClaims, t.egressClass)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
