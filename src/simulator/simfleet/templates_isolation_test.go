//go:build linux

package simfleet_test

import (
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// On isolated machines a promote saves the machine's writable layer, which
// every clone boots from; a hibernated (frozen) machine is saved as it is.
func TestIsolatedPromoteClonesTheMachineDisk(t *testing.T) {
	f, _ := startIsolatedFleet(t)
	root := clientFor(t, f.Node(0), rootToken)
	src, es := isolatedClaim(t, root, "builder")
	run(t, es, "echo built > app.txt")
	if err := root.Hibernate(ctxT(t), src.ID); err != nil {
		t.Fatal(err)
	}

	res, err := root.Promote(ctxT(t), src.ID, sandboxd.PromoteRequest{Template: "app:v1"})
	if err != nil {
		t.Fatalf("promote: %v", err)
	}
	again, err := root.Promote(ctxT(t), src.ID, sandboxd.PromoteRequest{Template: "app:v1"})
	if err != nil || again.ContentDigest != res.ContentDigest {
		t.Fatalf("a frozen machine promoted twice: %s then %+v %v", res.ContentDigest, again, err)
	}
	if row, err := root.Sandbox(ctxT(t), src.ID); err != nil || !row.Hibernated {
		t.Fatalf("promote woke the machine: %+v %v", row, err)
	}

	cl, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: "app:v1", ClaimRef: "default/clone"})
	if err != nil || cl.TemplateDigest != res.ContentDigest {
		t.Fatalf("clone: %+v %v", cl, err)
	}
	ec := newEnvdVia(t, root, cl, accessToken(cl.Token))
	if got := run(t, ec, "cat app.txt"); got != "built" {
		t.Fatalf("the clone reads %q", got)
	}
}
