package node_test

import (
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// The configured tenants are the initial set; the API changes it for the
// next request, and listings never carry a token.
func TestTenantAPI(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)

	page, err := root.Tenants(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []sandboxd.Tenant{{Name: "team-a", MaxClaims: 3}, {Name: "team-b"}}
	if !reflect.DeepEqual(page.Tenants, want) || page.Next != "" || !strings.HasPrefix(page.Digest, "sha256:") {
		t.Fatalf("initial set %+v", page)
	}
	initialDigest := page.Digest

	// Tenant tokens are authenticated but not authorized; unknown ones not.
	_, err = client(t, n, tenantA).Tenants(ctx, "", 0)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	wantStatus(t, client(t, n, unknownTok).PutTenant(ctx, sandboxd.Tenant{Name: "x", Token: "y"}), http.StatusUnauthorized, sandboxd.ErrUnauthorized)

	// A new tenant works at once; a name with '/' travels escaped.
	if err := root.PutTenant(ctx, sandboxd.Tenant{Name: "org/team-c", Token: "team-c-token", MaxClaims: 1, EgressClass: "desk"}); err != nil {
		t.Fatal(err)
	}
	c := client(t, n, "team-c-token")
	cl, err := c.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatalf("the new tenant's claim: %v", err)
	}
	_, err = c.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)
	// A cap change without the token keeps the token.
	if err := root.PutTenant(ctx, sandboxd.Tenant{Name: "org/team-c", MaxClaims: 2}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatalf("claim after raising the cap: %v", err)
	}

	page, err = root.Tenants(ctx, "", 2)
	if err != nil {
		t.Fatal(err)
	}
	want = []sandboxd.Tenant{{Name: "org/team-c", MaxClaims: 2, Claims: 2}, {Name: "team-a", MaxClaims: 3}}
	if !reflect.DeepEqual(page.Tenants, want) || page.Next != "team-a" || page.Digest == initialDigest {
		t.Fatalf("first page %+v", page)
	}
	page, err = root.Tenants(ctx, page.Next, 2)
	if err != nil || !reflect.DeepEqual(page.Tenants, []sandboxd.Tenant{{Name: "team-b"}}) || page.Next != "" {
		t.Fatalf("second page %+v (%v)", page, err)
	}

	// Removal: the token is refused at once, the claims keep running and
	// are listed as the removed tenant's; their own tokens cannot extend.
	if err := root.DeleteTenant(ctx, "org/team-c"); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, root.DeleteTenant(ctx, "org/team-c"), http.StatusNotFound, sandboxd.ErrNotFound)
	_, err = c.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	own := client(t, n, cl.Token)
	_, err = own.Renew(ctx, cl.ID, 60)
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	_, err = root.Fork(ctx, cl.ID, sandboxd.ForkRequest{Token: cl.Token, Count: 1})
	wantStatus(t, err, http.StatusForbidden, sandboxd.ErrForbidden)
	if _, err := root.Renew(ctx, cl.ID, 60); err != nil {
		t.Errorf("root renews a removed tenant's claim: %v", err)
	}
	page, _ = root.Tenants(ctx, "", 0)
	want = []sandboxd.Tenant{{Name: "team-a", MaxClaims: 3}, {Name: "team-b"}, {Name: "org/team-c", Claims: 2, Removed: true}}
	if !reflect.DeepEqual(page.Tenants, want) || page.Digest != initialDigest {
		t.Fatalf("after the removal %+v (digest back to the initial set's: %t)", page, page.Digest == initialDigest)
	}
	if page, _ := root.Tenants(ctx, "team-a", 0); len(page.Tenants) != 1 || page.Tenants[0].Name != "team-b" {
		t.Errorf("a later page lists %+v; removed tenants belong to the first", page.Tenants)
	}

	// Replace: team-a keeps its token, team-b goes, team-d arrives.
	page, err = root.ReplaceTenants(ctx, []sandboxd.Tenant{{Name: "team-a", MaxClaims: 5}, {Name: "team-d", Token: "team-d-token"}})
	if err != nil {
		t.Fatal(err)
	}
	want = []sandboxd.Tenant{{Name: "team-a", MaxClaims: 5}, {Name: "team-d"}, {Name: "org/team-c", Claims: 2, Removed: true}}
	if !reflect.DeepEqual(page.Tenants, want) {
		t.Fatalf("replace answered %+v", page.Tenants)
	}
	if _, err := client(t, n, tenantA).Sandboxes(ctx, ""); err != nil {
		t.Errorf("team-a's kept token: %v", err)
	}
	_, err = client(t, n, tenantB).Sandboxes(ctx, "")
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	if _, err := client(t, n, "team-d-token").Sandboxes(ctx, ""); err != nil {
		t.Errorf("team-d's token: %v", err)
	}

	// Refusals change nothing.
	before, _ := root.Tenants(ctx, "", 0)
	for name, put := range map[string]func() error{
		"bad name":          func() error { return root.PutTenant(ctx, sandboxd.Tenant{Name: ".dot", Token: "t1"}) },
		"new without token": func() error { return root.PutTenant(ctx, sandboxd.Tenant{Name: "team-e"}) },
		"root token":        func() error { return root.PutTenant(ctx, sandboxd.Tenant{Name: "team-e", Token: rootToken}) },
		"shared token":      func() error { return root.PutTenant(ctx, sandboxd.Tenant{Name: "team-e", Token: "team-d-token"}) },
		"negative cap":      func() error { return root.PutTenant(ctx, sandboxd.Tenant{Name: "team-e", Token: "t1", MaxClaims: -1}) },
		"duplicate in set": func() error {
			_, err := root.ReplaceTenants(ctx, []sandboxd.Tenant{{Name: "x", Token: "1"}, {Name: "x", Token: "2"}})
			return err
		},
		"read-only field": func() error {
			_, err := root.ReplaceTenants(ctx, []sandboxd.Tenant{{Name: "x", Token: "1", Claims: 3}})
			return err
		},
	} {
		wantStatus(t, put(), http.StatusBadRequest, sandboxd.ErrBadRequest)
		if after, _ := root.Tenants(ctx, "", 0); !reflect.DeepEqual(after, before) {
			t.Errorf("%s changed the set: %+v → %+v", name, before, after)
		}
	}
	for _, body := range []string{`{"token":"t2","tenants":[]}`, `{"token":"t2","max_claims":1,"egress":{}}`} {
		code, out := rawDo(t, http.MethodPut, "http://"+n.Addr()+"/v1/tenants/"+url.PathEscape("team-f"), rootToken, []byte(body), nil)
		if code != http.StatusBadRequest {
			t.Errorf("PUT with a foreign field %s: %d %s", body, code, out)
		}
	}
	if code, out := rawDo(t, http.MethodGet, "http://"+n.Addr()+"/v1/tenants?limit=10001", rootToken, nil, nil); code != http.StatusBadRequest {
		t.Errorf("limit past 10000: %d %s", code, out)
	}
}

// A node without a root token has no tenants to tell apart from root.
func TestTenantAPINeedsARootToken(t *testing.T) {
	cfg := testConfig()
	cfg.RootToken, cfg.Tenants = "", nil
	n := startNode(t, cfg)
	_, err := client(t, n, "").Tenants(ctxT(t), "", 0)
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
}
