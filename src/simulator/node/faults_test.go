package node_test

import (
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func TestFrozenInfoKeepsAnsweringTheOldCountsUntilThawed(t *testing.T) {
	n := startNode(t, testConfig())
	root := client(t, n, rootToken)
	ctx := ctxT(t)

	thaw := n.FreezeInfo()
	if _, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatalf("claim: %v", err)
	}
	info, err := root.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.Claimed != 0 || len(info.Pools) != 1 || info.Pools[0].Warm != 4 {
		t.Fatalf("frozen info = %+v, want what it said before the claim (none claimed, 4 warm)", info)
	}

	thaw()
	if info, err = root.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if info.Claimed != 1 {
		t.Fatalf("thawed info counts %d claimed, want the 1 sandbox the node holds", info.Claimed)
	}
}
