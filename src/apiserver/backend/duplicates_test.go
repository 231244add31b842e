package backend

import (
	"context"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// TestDeleteReleasesEverySandboxUnderTheName: a node that granted a claim
// after the create had moved on (its answer lost to a network cut) holds
// a second sandbox under the name until the fleet core's re-check
// releases it, and the inventory shows both meanwhile, the later one
// first. A delete of the name releases both, so no sandbox stands under
// a name whose delete succeeded.
func TestDeleteReleasesEverySandboxUnderTheName(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2, warm: []int{3, 1}})
	ctx := context.Background()
	if _, err := e.svc.Create(ctx, newSandbox("team-a", "dup", "base")); err != nil {
		t.Fatalf("Create: %v", err)
	}
	_, first, ok := e.entry("team-a/dup")
	if !ok {
		t.Fatal("no claim with claim_ref team-a/dup on the fleet")
	}
	// The late grant, on the other node.
	other := e.fleet.Node(0)
	if first == other.Name() {
		other = e.fleet.Node(1)
	}
	c, err := sandboxd.New(other.Addr(), sandboxd.WithToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Claim(ctx, sandboxd.ClaimRequest{Template: baseKey.Template, Net: baseKey.Net, Size: baseKey.Size, ClaimRef: "team-a/dup", NoRedirect: true}); err != nil {
		t.Fatalf("claim behind the server: %v", err)
	}
	e.publish()
	if all := e.inv.Store.AllByClaimRef("team-a", "dup"); len(all) != 2 {
		t.Fatalf("the inventory shows %d sandboxes under team-a/dup, want both", len(all))
	}

	if _, err := e.svc.Delete(ctx, "team-a", "dup"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	for _, n := range e.fleet.Nodes() {
		for _, en := range n.Snapshot().Entries {
			if en.ClaimRef == "team-a/dup" {
				t.Errorf("%s still holds %s under team-a/dup after the delete succeeded", n.Name(), en.ID)
			}
		}
	}
}
