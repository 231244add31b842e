package sandboxd

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
)

// Tenant is one tenant of the root-only tenant API. Token is only ever
// sent: a listing never carries it, and an update without one keeps the
// tenant's stored token.
type Tenant struct {
	Name  string `json:"name"`
	Token string `json:"token,omitempty"`
	// MaxClaims caps the tenant's live claims on the node; 0 is unlimited.
	MaxClaims int `json:"max_claims,omitempty"`
	// EgressClass names the node egress class the tenant's claims get.
	EgressClass string `json:"egress_class,omitempty"`
	// Claims counts the tenant's live claims on the answering node
	// (listings only).
	Claims int `json:"claims,omitempty"`
	// Removed marks a tenant no longer in the set that still owns claims
	// on the node (listings only).
	Removed bool `json:"removed,omitempty"`
}

// TenantUpdate is the body of PUT /v1/tenants/{name}.
type TenantUpdate struct {
	Token       string `json:"token,omitempty"`
	MaxClaims   int    `json:"max_claims,omitempty"`
	EgressClass string `json:"egress_class,omitempty"`
}

// TenantSet is the body of PUT /v1/tenants: the whole desired set.
type TenantSet struct {
	Tenants []Tenant `json:"tenants"`
}

// TenantPage is one page of GET /v1/tenants (and the answer of PUT
// /v1/tenants).
type TenantPage struct {
	Tenants []Tenant `json:"tenants"`
	// Digest is equal on two nodes holding the same set; empty when the
	// node reports none.
	Digest string `json:"digest,omitempty"`
	// Next is the following page's after; empty on the last page.
	Next string `json:"next,omitempty"`
}

func tenantPath(name string) string { return "/v1/tenants/" + url.PathEscape(name) }

// PutTenant adds t or changes it. An empty t.Token keeps the stored token;
// MaxClaims and EgressClass take the values sent. Root only.
func (c *Client) PutTenant(ctx context.Context, t Tenant) error {
	body := TenantUpdate{Token: t.Token, MaxClaims: t.MaxClaims, EgressClass: t.EgressClass}
	return c.do(ctx, http.MethodPut, tenantPath(t.Name), nil, body, nil, "PUT /v1/tenants/{name}")
}

// DeleteTenant removes a tenant: its token stops working at once, its live
// claims run to their deadlines. ErrNotFound for an unknown name. Root only.
func (c *Client) DeleteTenant(ctx context.Context, name string) error {
	return c.do(ctx, http.MethodDelete, tenantPath(name), nil, nil, nil, "DELETE /v1/tenants/{name}")
}

// ReplaceTenants makes tenants the node's whole set (a tenant left out is
// removed; an entry without a token keeps the stored one) and returns the
// first page of the new set. Root only.
func (c *Client) ReplaceTenants(ctx context.Context, tenants []Tenant) (*TenantPage, error) {
	if tenants == nil {
		tenants = []Tenant{} // an empty set, not a missing field
	}
	var out TenantPage
	if err := c.do(ctx, http.MethodPut, "/v1/tenants", nil, TenantSet{Tenants: tenants}, &out, "PUT /v1/tenants"); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tenants reads one page of the tenant set in name order, starting after
// the named tenant ("" for the first page); limit 0 is the node's default.
// Root only.
func (c *Client) Tenants(ctx context.Context, after string, limit int) (*TenantPage, error) {
	q := url.Values{}
	if after != "" {
		q.Set("after", after)
	}
	if limit != 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	var out TenantPage
	if err := c.do(ctx, http.MethodGet, "/v1/tenants", q, nil, &out, "GET /v1/tenants"); err != nil {
		return nil, err
	}
	return &out, nil
}
