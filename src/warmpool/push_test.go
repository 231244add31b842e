package warmpool

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

const testToken = "root-token-for-warmpool-tests"

var baseKey = sandbox.PoolKey{Template: "base", Net: "none", Size: "small"}

// startSimNode runs a real simulated sandboxd on loopback holding one
// warm pool of two.
func startSimNode(t *testing.T, name, token string) (*node.Node, *sandboxd.Client) {
	t.Helper()
	n, err := node.Start(context.Background(), node.Config{
		Name: name, RootToken: token, ScratchRoot: t.TempDir(),
		Pools: []sandboxd.PoolSpec{{Template: "preexisting", Warm: 2}},
	})
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	t.Cleanup(func() { _ = n.Close() })
	c, err := sandboxd.New(n.Addr(), sandboxd.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	return n, c
}

func poolsOf(t *testing.T, c *sandboxd.Client) map[sandbox.PoolKey]int {
	t.Helper()
	info, err := c.Info(context.Background())
	if err != nil {
		t.Fatalf("info: %v", err)
	}
	out := map[sandbox.PoolKey]int{}
	for _, p := range info.Pools {
		out[p.Key] = p.Target
	}
	return out
}

// TestPusherFailsClosedWithoutToken: even a node that takes requests
// without a token (none configured on it) gets no PUT from a token-less
// driver.
func TestPusherFailsClosedWithoutToken(t *testing.T) {
	n, c := startSimNode(t, "open-node", "")
	p := newPusher("", time.Second, 4, slog.New(slog.DiscardHandler))
	targets := []target{{Name: n.Name(), Addr: n.Addr()}}
	sets := desiredSets(map[sandbox.PoolKey]int{baseKey: 3}, []string{n.Name()})
	for _, full := range []bool{true, false} {
		if refused := p.push(context.Background(), targets, sets, full); len(refused) != 0 {
			t.Fatalf("token-less push reported refusals %v", refused)
		}
	}
	if got := p.puts.Load(); got != 0 {
		t.Fatalf("token-less driver sent %d PUTs", got)
	}
	pools := poolsOf(t, c)
	if _, ok := pools[baseKey]; ok || len(pools) != 1 {
		t.Fatalf("node pools changed to %v without a token", pools)
	}
}

func TestPusherSkipsUnchangedSetsUntilResync(t *testing.T) {
	n, c := startSimNode(t, "node-a", testToken)
	p := newPusher(testToken, 10*time.Second, 4, slog.New(slog.DiscardHandler))
	targets := []target{{Name: n.Name(), Addr: n.Addr()}}
	ctx := context.Background()

	sets := desiredSets(map[sandbox.PoolKey]int{baseKey: 3}, []string{n.Name()})
	if refused := p.push(ctx, targets, sets, false); len(refused) != 0 {
		t.Fatalf("refused: %v", refused)
	}
	pools := poolsOf(t, c)
	if len(pools) != 1 || pools[baseKey] != 3 {
		t.Fatalf("node pools = %v, want only base at 3 (the whole set is replaced)", pools)
	}
	p.push(ctx, targets, sets, false)
	if got := p.puts.Load(); got != 1 {
		t.Fatalf("an unchanged set was PUT again: %d PUTs", got)
	}
	p.push(ctx, targets, sets, true)
	if got := p.puts.Load(); got != 2 {
		t.Fatalf("a resync did not PUT: %d PUTs", got)
	}
	sets = desiredSets(map[sandbox.PoolKey]int{baseKey: 5}, []string{n.Name()})
	p.push(ctx, targets, sets, false)
	if got := p.puts.Load(); got != 3 || poolsOf(t, c)[baseKey] != 5 {
		t.Fatalf("a changed set: %d PUTs, node pools %v", got, poolsOf(t, c))
	}
	infos := p.infos(targets)
	if len(infos) != 1 || infos[0] == nil {
		t.Fatalf("no PUT answer kept: %v", infos)
	}
	if row, ok := infos[0].Pool(baseKey); !ok || row.Target != 5 {
		t.Fatalf("kept answer %+v, want base at target 5", infos[0])
	}
}

func TestPusherReportsRefusingNode(t *testing.T) {
	n, _ := startSimNode(t, "node-b", "another-token")
	p := newPusher(testToken, 10*time.Second, 4, slog.New(slog.DiscardHandler))
	targets := []target{{Name: n.Name(), Addr: n.Addr()}}
	sets := desiredSets(map[sandbox.PoolKey]int{baseKey: 1}, []string{n.Name()})
	refused := p.push(context.Background(), targets, sets, false)
	if refused[n.Name()] == nil {
		t.Fatalf("a node with another token accepted the set: %v", refused)
	}
	// The refusal is retried by the next pass, not remembered as sent.
	p.push(context.Background(), targets, sets, false)
	if got := p.puts.Load(); got != 2 {
		t.Fatalf("refused node retried %d times, want a retry on the next pass (2 PUTs)", got)
	}
	if infos := p.infos(targets); len(infos) != 1 || infos[0] != nil {
		t.Fatalf("a refusing node's pools are reported: %v", infos)
	}
}
