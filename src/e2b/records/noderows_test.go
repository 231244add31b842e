package records

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// oneNode is a NodeIndex of one node: its sandbox index, whatever address
// it is asked for.
type oneNode struct {
	c *sandboxd.Client
}

func (o oneNode) NodeSandboxes(ctx context.Context, _ string) ([]sandboxd.Sandbox, error) {
	return o.c.Sandboxes(ctx, "")
}

// A sandbox claimed after the node's rows were read is read again, however
// recent the read: another replica's create is listed with its labels at
// once, not left out of a metadata filter for the recheck window.
func TestRowsReadAgainForASandboxClaimedSinceTheRead(t *testing.T) {
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 1, RootToken: "root", EchoPorts: []int{}, Pools: []sandboxd.PoolSpec{{Template: "base", Warm: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	c, err := sandboxd.New(f.Node(0).Addr(), sandboxd.WithToken("root"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now())
	rows := newNodeRows(oneNode{c: c}, clk)
	ctx := context.Background()
	if _, found, err := rows.labels(ctx, "node", "sb_absent", clk.Now().Add(-time.Hour)); err != nil || found {
		t.Fatalf("an unknown sandbox: found %v, %v", found, err)
	}
	clk.Step(50 * time.Millisecond) // within the recheck window
	cl, err := c.Claim(ctx, sandboxd.ClaimRequest{Template: "base", Metadata: map[string]string{"u.team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	l, found, err := rows.labels(ctx, "node", cl.ID, clk.Now())
	if err != nil || !found || l["u.team"] != "a" {
		t.Fatalf("a sandbox claimed after the last read: labels %v, found %v, %v", l, found, err)
	}
}
