package fleet_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// staleDigest is a content digest no promote answered.
var staleDigest = "sha256:" + strings.Repeat("0", 64)

// templateOn is the template named name in one node's entry, if listed.
func templateOn(n fleet.NodeTemplates, name string) (sandboxd.TemplateInfo, bool) {
	for _, t := range n.Templates {
		if t.Key.Template == name {
			return t, true
		}
	}
	return sandboxd.TemplateInfo{}, false
}

// TestNodeTemplatesReadsEveryNodeAndReportsOneDown: a template promoted
// on one node is listed on that node's entry alone, with the digest the
// promote answered; a node that is down is an entry of its own with an
// error classified unavailable while the others are read.
func TestNodeTemplatesReadsEveryNodeAndReportsOneDown(t *testing.T) {
	const root = "templates-root"
	sim := startWarmSim(t, root, 3, 1)
	f := overSim(t, sim, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	c := claimOn(t, root, sim.Node(0).Addr(), "promoted")
	res, err := f.Promote(ctx, c, "fleet-test-pub")
	if err != nil {
		t.Fatal(err)
	}
	if res.Key.Template != "fleet-test-pub" || res.ContentDigest == "" {
		t.Fatalf("promote answered %+v", res)
	}
	if err := sim.Kill(2); err != nil {
		t.Fatal(err)
	}

	nodes := f.NodeTemplates(ctx)
	if len(nodes) != 3 {
		t.Fatalf("%d entries, want one per node (3)", len(nodes))
	}
	for i, n := range nodes {
		if n.Addr != sim.Node(i).Addr() {
			t.Errorf("entry %d is %s, want node %d's %s (the view's order)", i, n.Addr, i, sim.Node(i).Addr())
		}
	}
	if nodes[0].Err != nil || nodes[1].Err != nil {
		t.Fatalf("live nodes failed: %v, %v", nodes[0].Err, nodes[1].Err)
	}
	if got, ok := templateOn(nodes[0], "fleet-test-pub"); !ok || got.ContentDigest != res.ContentDigest {
		t.Errorf("node 0 lists %+v (found %v), want the promoted digest %s", got, ok, res.ContentDigest)
	}
	if _, ok := templateOn(nodes[1], "fleet-test-pub"); ok {
		t.Error("node 1 lists a template promoted on node 0")
	}
	if nodes[2].Err == nil || len(nodes[2].Templates) != 0 {
		t.Fatalf("the killed node: %d templates, err %v; want an error", len(nodes[2].Templates), nodes[2].Err)
	}
	if k := fleet.Classify(nodes[2].Err); k != fleet.KindUnavailable {
		t.Errorf("the killed node's error %v is kind %v, want KindUnavailable", nodes[2].Err, k)
	}
}

// TestLabelAndDeleteTemplateHonourTheDigest: label and delete act only
// while the template still has the digest given; a stale one is
// KindPrecondition and changes nothing. A delete of what is gone is
// KindNotFound.
func TestLabelAndDeleteTemplateHonourTheDigest(t *testing.T) {
	const root = "labels-root"
	sim := startWarmSim(t, root, 1, 1)
	f := overSim(t, sim, root)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	addr := sim.Node(0).Addr()
	c := claimOn(t, root, addr, "labelled")
	res, err := f.Promote(ctx, c, "fleet-test-labels")
	if err != nil {
		t.Fatal(err)
	}

	err = f.LabelTemplate(ctx, addr, res.Key, map[string]string{"e2b.build": "stale"}, staleDigest)
	if k := fleet.Classify(err); k != fleet.KindPrecondition {
		t.Errorf("label with a stale digest = %v (kind %v), want KindPrecondition", err, k)
	}
	if err := f.LabelTemplate(ctx, addr, res.Key, map[string]string{"e2b.build": "b1"}, res.ContentDigest); err != nil {
		t.Fatal(err)
	}
	got, ok := templateOn(f.NodeTemplates(ctx)[0], "fleet-test-labels")
	if !ok || got.Labels["e2b.build"] != "b1" {
		t.Fatalf("after labelling: %+v (found %v), want e2b.build=b1", got, ok)
	}

	err = f.DeleteTemplate(ctx, addr, res.Key, staleDigest)
	if k := fleet.Classify(err); k != fleet.KindPrecondition {
		t.Errorf("delete with a stale digest = %v (kind %v), want KindPrecondition", err, k)
	}
	if _, ok := templateOn(f.NodeTemplates(ctx)[0], "fleet-test-labels"); !ok {
		t.Fatal("a delete with a stale digest removed the template")
	}
	if err := f.DeleteTemplate(ctx, addr, res.Key, res.ContentDigest); err != nil {
		t.Fatal(err)
	}
	if _, ok := templateOn(f.NodeTemplates(ctx)[0], "fleet-test-labels"); ok {
		t.Error("the template is still listed after its delete")
	}
	err = f.DeleteTemplate(ctx, addr, res.Key, "")
	if k := fleet.Classify(err); k != fleet.KindNotFound || !errors.Is(err, sandboxd.ErrNotFound) {
		t.Errorf("delete of a deleted template = %v (kind %v), want sandboxd.ErrNotFound", err, k)
	}
}

// TestPromoteOfAReleasedSandboxIsNotFound: promote goes to the sandbox's
// node like every sandbox verb, so a sandbox gone from it is ErrNotFound.
func TestPromoteOfAReleasedSandboxIsNotFound(t *testing.T) {
	const root = "promote-root"
	sim := startWarmSim(t, root, 1, 1)
	f := overSim(t, sim, root)
	ctx := context.Background()
	c := claimOn(t, root, sim.Node(0).Addr(), "gone")
	if err := f.Release(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Promote(ctx, c, "fleet-test-gone"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("promote of a released sandbox = %v, want ErrNotFound", err)
	}
}
