package fleet_test

import (
	"context"
	"errors"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
)

// TestStatsReadsTheSandboxsNode: a claimed sandbox's stats name it and
// its vCPUs; once released, its stats are ErrNotFound.
func TestStatsReadsTheSandboxsNode(t *testing.T) {
	const root = "stats-root"
	sim := startWarmSim(t, root, 2, 1)
	f := overSim(t, sim, root)
	ctx := context.Background()
	c := claimOn(t, root, sim.Node(1).Addr(), "measured")
	st, err := f.Stats(ctx, c.Sandbox)
	if err != nil {
		t.Fatal(err)
	}
	if st.ID != c.ID || st.CPUCount <= 0 || st.MemTotalBytes <= 0 {
		t.Errorf("stats %+v, want %s's with its vCPUs and memory", st, c.ID)
	}
	if err := f.Release(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Stats(ctx, c.Sandbox); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("stats of a released sandbox = %v, want ErrNotFound", err)
	}
}
