package smoke

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// PromoteAndClone claims a warm VM, publishes it with promote under a
// fresh name, claims a clone of the template with require_promoted (the
// answer names the promote's digest), and deletes the template, after
// which such a claim is refused.
func PromoteAndClone(t testing.TB, n Node) {
	c := n.client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	src, err := c.Claim(ctx, sandboxd.ClaimRequest{Template: n.Template, ClaimRef: "hardware/promote-source", TTLSeconds: 300})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	owner, err := c.At(src.OwnerAddr)
	if err != nil {
		t.Fatal(err)
	}
	releaseAtEnd(t, owner, src.ID)

	name := "smoke/promoted-" + strings.ToLower(time.Now().UTC().Format("20060102t150405"))
	pub, err := owner.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: name})
	if err != nil {
		t.Fatalf("promote: %v", err)
	}
	if pub.Key.Template != name || !strings.HasPrefix(pub.ContentDigest, "sha256:") {
		t.Fatalf("promote answered %+v", pub)
	}
	t.Cleanup(func() {
		if err := owner.DeleteTemplate(context.Background(), pub.Key, ""); err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
			t.Errorf("delete template: %v", err)
		}
	})
	clone, err := owner.Claim(ctx, sandboxd.ClaimRequest{
		Template: name, Net: pub.Key.Net, Size: pub.Key.Size, ClaimRef: "hardware/promote-clone", TTLSeconds: 120, RequirePromoted: true,
	})
	if err != nil {
		t.Fatalf("claim of the template: %v", err)
	}
	cloneOwner, err := c.At(clone.OwnerAddr)
	if err != nil {
		t.Fatal(err)
	}
	releaseAtEnd(t, cloneOwner, clone.ID)
	if clone.TemplateDigest != pub.ContentDigest {
		t.Errorf("the clone names digest %q, the promote %q", clone.TemplateDigest, pub.ContentDigest)
	}
	if err := owner.DeleteTemplate(ctx, pub.Key, pub.ContentDigest); err != nil {
		t.Fatalf("delete template: %v", err)
	}
	_, err = owner.Claim(ctx, sandboxd.ClaimRequest{
		Template: name, Net: pub.Key.Net, Size: pub.Key.Size, ClaimRef: "hardware/promote-gone", TTLSeconds: 60, RequirePromoted: true, NoRedirect: true,
	})
	if !errors.Is(err, sandboxd.ErrNotFound) {
		t.Errorf("claim of a deleted template = %v, want not found", err)
	}
}

func releaseAtEnd(t testing.TB, c *sandboxd.Client, id string) {
	t.Cleanup(func() {
		if err := c.Release(context.Background(), id); err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
			t.Errorf("release %s: %v", id, err)
		}
	})
}
