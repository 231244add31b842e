package node_test

import (
	"net/http"
	"testing"

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

	egress := sandboxd.PoolKey{Template: tmpl, Net: "egress"}.WithDefaults()
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
