package simfleet_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// A template promoted on one member is claimable through any other: the
// entry node redirects with require_promoted, the client follows, and the
// holder clones it. Deletes find the holder the same way.
func TestPromotedTemplateAcrossTheMesh(t *testing.T) {
	f := startFleet(t, simfleet.Config{Nodes: 2, Pools: []sandboxd.PoolSpec{{Template: tmpl, Warm: 1}}})
	ctx := ctxT(t)
	entry, holder := f.Node(0), f.Node(1)
	atHolder := clientFor(t, holder, tenantTok)
	src, err := atHolder.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, NoRedirect: true})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := holder.ScratchDir(src.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "built.txt"), []byte("from the holder"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := atHolder.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: "team/app:v1"})
	if err != nil {
		t.Fatal(err)
	}
	key := sandbox.PoolKey{Template: "team/app:v1"}.WithDefaults()
	if res.Key != key || !holder.HasTemplate(key) || entry.HasTemplate(key) {
		t.Fatalf("promote = %+v; holder has it %v, entry %v", res, holder.HasTemplate(key), entry.HasTemplate(key))
	}

	atEntry := clientFor(t, entry, tenantTok)
	raw, err := atEntry.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: key.Template})
	if err != nil || !slices.Equal(raw.Redirect, []string{holder.Addr()}) || !raw.RequirePromoted {
		t.Fatalf("claim at the entry: %+v %v", raw, err)
	}
	cl, err := atEntry.Claim(ctx, sandboxd.ClaimRequest{Template: key.Template, ClaimRef: "ns/clone"})
	if err != nil {
		t.Fatalf("followed claim: %v", err)
	}
	if cl.OwnerAddr != holder.Addr() || cl.TemplateDigest != res.ContentDigest {
		t.Fatalf("clone = %+v, want owner %s and digest %s", cl, holder.Addr(), res.ContentDigest)
	}
	cdir, _ := holder.ScratchDir(cl.ID)
	if b, err := os.ReadFile(filepath.Join(cdir, "built.txt")); err != nil || string(b) != "from the holder" {
		t.Fatalf("clone's disk: %q %v", b, err)
	}
	if c := entry.Counters(); c.Redirects != 2 || c.ClaimsCold+c.ClaimsClone+c.ClaimsWarm != 0 {
		t.Fatalf("the entry provisioned instead of redirecting: %+v", c)
	}
	if info, _ := clientFor(t, holder, rootToken).Info(ctx); len(info.Templates) != 1 || info.Templates[0].Tenant != "team" {
		t.Fatalf("holder info templates: %+v", info.Templates)
	}

	if err := atEntry.DeleteTemplate(ctx, key, res.ContentDigest); err != nil {
		t.Fatalf("followed delete: %v", err)
	}
	if holder.HasTemplate(key) {
		t.Fatal("the holder kept the template")
	}
	if err := atEntry.DeleteTemplate(ctx, key, ""); sandboxd.StatusOf(err) != 404 {
		t.Fatalf("second delete: %v, want 404", err)
	}
	_, err = atEntry.Claim(ctx, sandboxd.ClaimRequest{Template: key.Template, RequirePromoted: true})
	if sandboxd.StatusOf(err) != 404 {
		t.Fatalf("require_promoted after the delete: %v, want 404", err)
	}

	// A holder leaving the mesh takes its templates with it: the key is an
	// ordinary one again at the entry, which cold-boots it.
	if _, err := atHolder.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: key.Template}); err != nil {
		t.Fatal(err)
	}
	if err := f.Kill(1); err != nil {
		t.Fatal(err)
	}
	local, err := atEntry.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: key.Template})
	if err != nil || local.IsRedirect() || local.OwnerAddr != entry.Addr() || local.TemplateDigest != "" {
		t.Fatalf("claim after the holder died: %+v %v", local, err)
	}
}
