package node_test

import (
	"net/http"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// A node with an egress attachment serves the egress lane: a warm pool on
// it and claims from that pool. Without one the lane is 409 (see
// TestClaimLeaseClampAndBadRequests).
func TestEgressAttachmentServesTheEgressLane(t *testing.T) {
	cfg := testConfig()
	cfg.EgressAttachment = true
	cfg.Pools = append(cfg.Pools, sandboxd.PoolSpec{Template: tmpl, Net: "egress", Warm: 2})
	n := startNode(t, cfg)
	root := client(t, n, rootToken)
	ctx := ctxT(t)

	egress := sandbox.PoolKey{Template: tmpl, Net: "egress"}.WithDefaults()
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Net: "egress", ClaimRef: "ns/e"})
	if err != nil {
		t.Fatalf("egress claim with an attachment: %v", err)
	}
	sb, err := root.Sandbox(ctx, cl.ID)
	if err != nil || sb.Key != egress {
		t.Fatalf("claimed %+v, %v; want key %v", sb, err, egress)
	}
	if c := n.Counters(); c.ClaimsWarm != 1 {
		t.Fatalf("egress claim was not a warm hit: %+v", c)
	}

	plain := startNode(t, testConfig())
	_, err = client(t, plain, rootToken).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Net: "egress"})
	if sandboxd.StatusOf(err) != http.StatusConflict {
		t.Fatalf("egress claim without an attachment: %v, want 409", err)
	}
}

// Egress-lane sandboxes stay live from claim to release, as on sandboxd:
// hibernate, fork and checkpoint are 409 there, and stay available on the
// none lane of the same node.
func TestEgressLaneRefusesSnapshotVerbs(t *testing.T) {
	cfg := testConfig()
	cfg.EgressAttachment = true
	cfg.Pools = append(cfg.Pools, sandboxd.PoolSpec{Template: tmpl, Net: "egress", Warm: 2})
	n := startNode(t, cfg)
	root := client(t, n, rootToken)
	ctx := ctxT(t)

	eg, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Net: "egress", ClaimRef: "ns/e"})
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Hibernate(ctx, eg.ID); sandboxd.StatusOf(err) != http.StatusConflict {
		t.Errorf("hibernate on the egress lane: %v, want 409", err)
	}
	if _, err := root.Fork(ctx, eg.ID, sandboxd.ForkRequest{Count: 1}); sandboxd.StatusOf(err) != http.StatusConflict {
		t.Errorf("fork on the egress lane: %v, want 409", err)
	}
	if _, err := root.Checkpoint(ctx, eg.ID, sandboxd.CheckpointRequest{}); sandboxd.StatusOf(err) != http.StatusConflict {
		t.Errorf("checkpoint on the egress lane: %v, want 409", err)
	}
	if sb, err := root.Sandbox(ctx, eg.ID); err != nil || sb.Hibernated {
		t.Errorf("egress sandbox after refused verbs: %+v, %v", sb, err)
	}

	none, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "ns/n"})
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Hibernate(ctx, none.ID); err != nil {
		t.Errorf("hibernate on the none lane: %v", err)
	}
}
