package mesh_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/internal/fleettest"
	"github.com/cocoonstack/sandbox-operator/src/mesh"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestDiscoveryFromOneSeed(t *testing.T) {
	c := startCluster(t, 2, 0, 3)
	m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0)}})
	if got := m.LiveNodes(); len(got) != 0 {
		t.Fatalf("live nodes before the first refresh = %v, want none", got)
	}
	refresh(t, m)

	want := sorted(c.addr(0), c.addr(1), c.addr(2))
	if got := m.LiveNodes(); !slices.Equal(got, want) {
		t.Fatalf("live nodes = %v, want %v (learned through /v1/peers)", got, want)
	}
	warm := map[string]int{}
	for _, n := range m.View() {
		for _, p := range n.Pools {
			if p.Key == baseKey {
				warm[n.Addr] = p.Warm
			}
		}
		if n.Seed != (n.Addr == c.addr(0)) {
			t.Errorf("%s: Seed = %v", n.Addr, n.Seed)
		}
	}
	if warm[c.addr(0)] != 2 || warm[c.addr(1)] != 0 || warm[c.addr(2)] != 3 {
		t.Errorf("warm counts from /v1/info = %v", warm)
	}
}

func TestNodeLeavesAndReturns(t *testing.T) {
	c := startCluster(t, 1, 1, 1)
	m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0)}, RefreshInterval: 20 * time.Millisecond, NodeTimeout: 2 * time.Second})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); m.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	all := sorted(c.addr(0), c.addr(1), c.addr(2))
	poll.Until(t, "all three nodes live", func() bool { return slices.Equal(m.LiveNodes(), all) })

	c.stop(2)
	poll.Until(t, "the stopped node to leave the view", func() bool {
		return slices.Equal(m.LiveNodes(), sorted(c.addr(0), c.addr(1)))
	})
	c.restart(2)
	poll.Until(t, "the restarted node to come back", func() bool { return slices.Equal(m.LiveNodes(), all) })

	// The seed itself goes away and comes back: it is retried forever,
	// even while no peer names it.
	c.stop(0)
	poll.Until(t, "the seed to leave the view", func() bool {
		return slices.Equal(m.LiveNodes(), sorted(c.addr(1), c.addr(2)))
	})
	c.restart(0)
	poll.Until(t, "the seed to come back", func() bool { return slices.Equal(m.LiveNodes(), all) })
}

func TestRefreshFindsNoNode(t *testing.T) {
	c := startCluster(t, 1)
	addr := c.addr(0)
	c.stop(0)
	m := newMesh(t, mesh.Config{Seeds: []string{addr}, NodeTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Refresh(ctx); err == nil {
		t.Fatal("refresh with every seed down succeeded")
	}
	if got := m.LiveNodes(); len(got) != 0 {
		t.Fatalf("live nodes = %v", got)
	}
}

func TestListAcrossNodesAndNamespaces(t *testing.T) {
	c := startCluster(t, 2, 2, 2)
	a0 := c.claimAt(t, 0, "team-a/one")
	a2 := c.claimAt(t, 2, "team-a/two")
	b1 := c.claimAt(t, 1, "team-b/three")
	c.claimAt(t, 1, "") // no claim reference: in no namespace
	m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0)}})
	refresh(t, m)
	ctx := context.Background()

	got, err := m.List(ctx, "team-a")
	if err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(got); !slices.Equal(ids, sorted(a0.ID, a2.ID)) {
		t.Fatalf("team-a lists %v, want %v", ids, sorted(a0.ID, a2.ID))
	}
	for _, sb := range got {
		want := c.addr(0)
		if sb.ID == a2.ID {
			want = c.addr(2)
		}
		if sb.NodeAddr != want || sb.Namespace != "team-a" || sb.Key != baseKey || sb.ClaimedAt.IsZero() || sb.Deadline.IsZero() {
			t.Errorf("listed %+v", sb)
		}
	}
	all, err := m.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(all); !slices.Equal(ids, sorted(a0.ID, a2.ID, b1.ID)) {
		t.Fatalf("every namespace lists %v", ids)
	}

	// A dead node contributes nothing; the rest still answer.
	c.stop(2)
	got, err = m.List(ctx, "team-a")
	if err != nil {
		t.Fatalf("list with one node down: %v", err)
	}
	if ids := idsOf(got); !slices.Equal(ids, []string{a0.ID}) {
		t.Fatalf("team-a with node 2 down lists %v", ids)
	}
	if slices.Contains(m.LiveNodes(), c.addr(2)) {
		t.Error("a node that failed a list stays live")
	}
}

func TestClaimPrefersWarmNodes(t *testing.T) {
	c := startCluster(t, 0, 3, 0)
	m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0)}})
	refresh(t, m)
	core := newCore(t, m)
	for i := range 3 {
		cl, err := core.Claim(context.Background(), claimReq("w"+string(rune('0'+i)), 0))
		if err != nil {
			t.Fatal(err)
		}
		if cl.NodeAddr != c.addr(1) {
			t.Errorf("claim %d landed on %s, want the warm node %s", i, cl.NodeAddr, c.addr(1))
		}
	}
	for _, i := range []int{0, 2} {
		if r := c.node(i).Counters().Redirects; r != 0 {
			t.Errorf("node %d redirected %d claims; the view should have entered at the warm node", i, r)
		}
	}
}

// staleView is the mesh as it looked before node 1's warm VMs went:
// it still counts them, so the core enters there and node 1 redirects.
type staleView struct {
	*mesh.Mesh
	warmAt string
}

func (v staleView) Nodes() []fleet.Node {
	nodes := v.Mesh.Nodes()
	for i := range nodes {
		nodes[i].Warm = map[sandbox.PoolKey]int{baseKey: 0}
		if nodes[i].Addr == v.warmAt {
			nodes[i].Warm[baseKey] = 4
		}
	}
	return nodes
}

func TestClaimFollowsRedirect(t *testing.T) {
	c := startCluster(t, 0, 4)
	m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0), c.addr(1)}})
	refresh(t, m)
	core := newCore(t, staleView{Mesh: m, warmAt: c.addr(0)})
	ctx := context.Background()
	var claims []fleet.Claimed
	for _, name := range []string{"r1", "r2"} {
		cl, err := core.Claim(ctx, claimReq(name, 600))
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, cl)
	}
	// The view sent both claims to the cold node, which redirected them.
	if r := c.node(0).Counters().Redirects; r != 2 {
		t.Fatalf("cold node redirected %d claims, want 2", r)
	}
	for _, cl := range claims {
		if cl.NodeAddr != c.addr(1) || cl.Node != c.addr(1) {
			t.Errorf("claim %s owned by %s (%s), want the warm node", cl.Name, cl.NodeAddr, cl.Node)
		}
		// The owner's index records the claim reference.
		got, err := m.Find(ctx, "ns", cl.ID)
		if err != nil || got.Name != cl.Name || got.NodeAddr != c.addr(1) {
			t.Errorf("Find(%s) = %+v, %v", cl.ID, got, err)
		}
	}
}

func TestClaimSkipsDeadNodeAndReportsCapacity(t *testing.T) {
	c := startCluster(t, 1, 1)
	m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0)}})
	refresh(t, m)
	c.stop(0)
	ctx := context.Background()
	core := newCore(t, m)
	cl, err := core.Claim(ctx, claimReq("x", 0))
	if err != nil {
		t.Fatalf("claim with a dead node in the view: %v", err)
	}
	if cl.NodeAddr != c.addr(1) {
		t.Errorf("claim landed on %s", cl.NodeAddr)
	}

	n1, err := sandboxd.New(c.addr(1), sandboxd.WithToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n1.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = core.Claim(ctx, claimReq("y", 0))
	if !errors.Is(err, sandboxd.ErrCapacity) {
		t.Fatalf("claim on a drained fleet: %v, want sandboxd.ErrCapacity", err)
	}
}

func TestGetFindsOwnerAndScopesNamespace(t *testing.T) {
	c := startCluster(t, 1, 1, 1)
	cl := c.claimAt(t, 2, "team-a/owned")
	// No refresh: the index is empty, so Get must ask the nodes.
	m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0), c.addr(1), c.addr(2)}})
	ctx := context.Background()
	dns, _ := sandbox.DNSID(cl.ID)
	for _, id := range []string{cl.ID, dns} {
		sb, err := m.Find(ctx, "team-a", id)
		if err != nil {
			t.Fatalf("Find(%s): %v", id, err)
		}
		if sb.ID != cl.ID || sb.NodeAddr != c.addr(2) || sb.Name != "owned" || sb.Namespace != "team-a" {
			t.Errorf("Find(%s) = %+v", id, sb)
		}
	}
	if _, err := m.Find(ctx, "team-b", cl.ID); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("Find from another namespace: %v, want fleet.ErrNotFound", err)
	}
	if _, err := m.Find(ctx, "team-a", "sb_doesnotexist"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("Find of an unknown id: %v, want fleet.ErrNotFound", err)
	}
	if _, err := m.Find(ctx, "team-a", "not-an-id"); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("Find of a malformed id: %v, want fleet.ErrNotFound", err)
	}

	refresh(t, m)
	if addr, ok := m.Locator("").Owner(cl.ID); !ok || addr != c.addr(2) {
		t.Errorf("Locator(\"\").Owner = %q, %v", addr, ok)
	}
	if addr, ok := m.Locator("team-a").Owner(cl.ID); !ok || addr != c.addr(2) {
		t.Errorf("Locator(team-a).Owner = %q, %v", addr, ok)
	}
	if _, ok := m.Locator("team-b").Owner(cl.ID); ok {
		t.Error("Locator(team-b) routes team-a's sandbox")
	}
	if got := m.Locator("").Nodes(); !slices.Equal(got, sorted(c.addr(0), c.addr(1), c.addr(2))) {
		t.Errorf("Nodes = %v", got)
	}
	c.stop(2)
	refresh(t, m)
	if _, ok := m.Locator("").Owner(cl.ID); ok {
		t.Error("Owner still routes to a node that left the view")
	}
}

func TestLocatorSeesClaimBeforeRefresh(t *testing.T) {
	c := startCluster(t, 2)
	m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0)}})
	refresh(t, m)
	cl, err := newCore(t, m).Claim(context.Background(), claimReq("fresh", 0))
	if err != nil {
		t.Fatal(err)
	}
	if addr, ok := m.Locator("ns").Owner(cl.ID); !ok || addr != c.addr(0) {
		t.Errorf("Owner of a claim made through the mesh = %q, %v", addr, ok)
	}
}

func TestNewNeedsSeeds(t *testing.T) {
	if _, err := mesh.New(mesh.Config{}); err == nil {
		t.Fatal("New without seeds succeeded")
	}
	if _, err := mesh.New(mesh.Config{Seeds: []string{"ftp://x:1"}}); err == nil {
		t.Fatal("New with an unusable seed succeeded")
	}
}

func idsOf(sbs []fleet.Sandbox) []string {
	out := make([]string, 0, len(sbs))
	for _, sb := range sbs {
		out = append(out, sb.ID)
	}
	slices.Sort(out)
	return out
}

func TestConformance(t *testing.T) {
	fleettest.Run(t, func(t *testing.T, spec fleettest.Spec) fleettest.Harness {
		warm := make([]int, spec.Nodes)
		for i := range warm {
			warm[i] = spec.Warm
		}
		c := startCluster(t, warm...)
		m := newMesh(t, mesh.Config{Seeds: []string{c.addr(0)}})
		refresh(t, m)
		core, err := fleet.New(fleet.Config{View: m, Token: rootToken, FollowRedirects: true, Rand: spec.Rand})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(core.Close)
		return fleettest.Harness{Fleet: core, Key: baseKey, Owners: func() map[string]int {
			owners, err := fleettest.CountOwners(context.Background(), c.addrs, rootToken)
			if err != nil {
				t.Fatal(err)
			}
			return owners
		}}
	})
}
