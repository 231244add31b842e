package e2b_test

import (
	"context"
	"sync"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// nodeDiesAfterClaim is the real fleet, except that the node granting the
// first claim dies before the surface opens the sandbox's envd: a crash
// between the claim and the init.
type nodeDiesAfterClaim struct {
	e2b.Fleet
	sim    *simfleet.Fleet
	once   sync.Once
	killed string // the dead node's address
	claims int
	mu     sync.Mutex
}

func (f *nodeDiesAfterClaim) Claim(ctx context.Context, req fleet.ClaimRequest) (fleet.Claimed, error) {
	cl, err := f.Fleet.Claim(ctx, req)
	f.mu.Lock()
	f.claims++
	f.mu.Unlock()
	if err == nil {
		f.once.Do(func() {
			for i, n := range f.sim.Nodes() {
				if n.Addr() == cl.NodeAddr {
					_ = f.sim.Kill(i)
					f.killed = cl.NodeAddr
				}
			}
		})
	}
	return cl, err
}

func TestCreateMovesOnWhenTheNodeDiesBeforeInit(t *testing.T) {
	dying := &nodeDiesAfterClaim{}
	e := newEnv(t, envOptions{fleet: func(f e2b.Fleet) e2b.Fleet { dying.Fleet = f; return dying }})
	dying.sim = e.fleet

	c := e.create(t, keyDef, nil)
	if dying.killed == "" {
		t.Fatal("no node was killed after the first claim")
	}
	if dying.claims != 2 {
		t.Fatalf("%d claims, want the first on the node that died and one more", dying.claims)
	}
	// The sandbox answered lives on the node that is still up.
	var owner string
	for i, n := range e.fleet.Nodes() {
		if !e.fleet.Alive(i) {
			continue
		}
		for _, en := range n.Snapshot().Entries {
			if sandbox.SameID(en.ID, c.SandboxID) {
				owner = n.Addr()
			}
		}
	}
	if owner == "" || owner == dying.killed {
		t.Fatalf("the created sandbox %s is on %q, want the live node (dead: %s)", c.SandboxID, owner, dying.killed)
	}
}
