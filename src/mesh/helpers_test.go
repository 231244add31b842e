package mesh_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/mesh"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

const (
	rootToken = "mesh-test-root"
	template  = "base:24.04"
)

var baseKey = sandbox.PoolKey{Template: template}.WithDefaults()

// cluster is a set of simulated nodes that gossip with each other, where
// a node can be stopped (its listener closed) and started again on the
// same address, which the simulator's own fleet cannot do.
type cluster struct {
	t     *testing.T
	mu    sync.Mutex
	nodes []*node.Node // nil while stopped
	addrs []string
	warm  []int
}

// startCluster starts one node per entry of warm, each with a pool of
// that many warm VMs of baseKey (no pool at all for 0).
func startCluster(t *testing.T, warm ...int) *cluster {
	t.Helper()
	c := &cluster{t: t, nodes: make([]*node.Node, len(warm)), addrs: make([]string, len(warm)), warm: warm}
	for i := range warm {
		c.start(i, "127.0.0.1:0")
	}
	t.Cleanup(func() {
		for i := range warm {
			c.stop(i)
		}
	})
	return c
}

func (c *cluster) start(i int, listen string) {
	c.t.Helper()
	var pools []sandboxd.PoolSpec
	if c.warm[i] > 0 {
		pools = []sandboxd.PoolSpec{{Template: template, Warm: c.warm[i]}}
	}
	n, err := node.Start(context.Background(), node.Config{
		Name:       fmt.Sprintf("node-%d", i),
		ListenAddr: listen,
		RootToken:  rootToken,
		Pools:      pools,
		MaxTTL:     time.Hour,
		Mesh:       c,
	})
	if err != nil {
		c.t.Fatalf("start node %d: %v", i, err)
	}
	if c.warm[i] > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := n.WaitWarm(ctx, baseKey, c.warm[i]); err != nil {
			c.t.Fatalf("node %d never warmed: %v", i, err)
		}
	}
	c.mu.Lock()
	c.nodes[i], c.addrs[i] = n, n.Addr()
	c.mu.Unlock()
}

// stop closes node i's listener and every connection; its sandboxes die.
func (c *cluster) stop(i int) {
	c.mu.Lock()
	n := c.nodes[i]
	c.nodes[i] = nil
	c.mu.Unlock()
	if n != nil {
		if err := n.Close(); err != nil {
			c.t.Errorf("close node %d: %v", i, err)
		}
	}
}

// restart starts node i again on the address it had.
func (c *cluster) restart(i int) { c.start(i, c.addr(i)) }

func (c *cluster) node(i int) *node.Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes[i]
}

func (c *cluster) addr(i int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.addrs[i]
}

// Peers implements node.Mesh: every running node but self.
func (c *cluster) Peers(self *node.Node) []node.Peer {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []node.Peer
	for _, n := range c.nodes {
		if n != nil && n != self {
			out = append(out, n)
		}
	}
	return out
}

// claimAt claims directly at node i under claimRef.
func (c *cluster) claimAt(t *testing.T, i int, claimRef string) *sandboxd.Claim {
	t.Helper()
	cl, err := sandboxd.New(c.addr(i), sandboxd.WithToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	got, err := cl.ClaimNoFollow(context.Background(), sandboxd.ClaimRequest{Template: template, ClaimRef: claimRef, NoRedirect: true})
	if err != nil {
		t.Fatalf("claim at node %d: %v", i, err)
	}
	return &sandboxd.Claim{ID: got.ID, Token: got.Token, OwnerAddr: got.OwnerAddr, Deadline: got.Deadline}
}

func newMesh(t *testing.T, cfg mesh.Config) *mesh.Mesh {
	t.Helper()
	if cfg.Token == "" {
		cfg.Token = rootToken
	}
	if cfg.NodeTimeout == 0 {
		cfg.NodeTimeout = 10 * time.Second
	}
	m, err := mesh.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func refresh(t *testing.T, m *mesh.Mesh) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.Refresh(ctx); err != nil {
		t.Fatalf("refresh: %v", err)
	}
}

func sorted(s ...string) []string {
	out := slices.Clone(s)
	slices.Sort(out)
	return out
}

// newCore is the fleet core over view, as sandbox-e2b builds it.
func newCore(t *testing.T, view fleet.View) *fleet.Fleet {
	t.Helper()
	core, err := fleet.New(fleet.Config{View: view, Token: rootToken, FollowRedirects: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	return core
}

func claimReq(name string, ttl int) fleet.ClaimRequest {
	return fleet.ClaimRequest{Ref: sandbox.ClaimRef{Namespace: "ns", Name: name}, Key: baseKey, TTLSeconds: ttl}
}
