package metrics_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const rootToken = "root"

var smallKey = sandbox.PoolKey{Template: "base:24.04", Size: "small"}.WithDefaults()

// view shows one simulated node keeping warm smallKey VMs.
type view []fleet.Node

func (v view) Nodes() []fleet.Node { return v }
func (view) List(context.Context, string) ([]fleet.Sandbox, error) {
	return nil, nil
}
func (view) Find(context.Context, string, string) (fleet.Sandbox, error) {
	return fleet.Sandbox{}, fleet.ErrNotFound
}

// coreOverOneNode is a fleet core reporting its claims to claims as front,
// over one simulated node with warm small VMs that grants one live claim:
// every claim after the first is refused for capacity (429), however fast
// the pool refills.
func coreOverOneNode(t *testing.T, claims *metrics.Claims, warm int) *fleet.Fleet {
	t.Helper()
	sim, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 1, RootToken: rootToken, EchoPorts: []int{}, RefillDelay: time.Millisecond, MaxClaims: 1,
		Pools: []sandboxd.PoolSpec{{Template: smallKey.Template, Warm: warm}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	n := sim.Node(0)
	if err := n.WaitWarm(context.Background(), smallKey, warm); err != nil {
		t.Fatal(err)
	}
	core, err := fleet.New(fleet.Config{
		View:  view{{Name: n.Name(), Addr: n.Addr(), Warm: map[sandbox.PoolKey]int{smallKey: warm}}},
		Token: rootToken, ClaimObserver: claims,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	return core
}

func claim(core *fleet.Fleet, front, name, size string) error {
	key := smallKey
	key.Size = size
	_, err := core.Claim(context.Background(), fleet.ClaimRequest{Ref: sandbox.ClaimRef{Namespace: "team", Name: name}, Key: key, Front: front})
	return err
}

// TestClaimsCountedByFrontTierAndOutcome: a claim that got a sandbox, one
// the node had no capacity for and one of a size no node serves are each
// counted and timed under their own outcome; the unknown size is "other",
// not the caller's string, as an unknown front is.
func TestClaimsCountedByFrontTierAndOutcome(t *testing.T) {
	reg := metrics.NewRegistry()
	claims := metrics.NewClaims(reg)
	core := coreOverOneNode(t, claims, 1)

	if err := claim(core, metrics.FrontE2B, "first", "small"); err != nil {
		t.Fatal(err)
	}
	if err := claim(core, metrics.FrontKubernetes, "second", "small"); fleet.Classify(err) != fleet.KindCapacity {
		t.Fatalf("a claim past the node's max_claims = %v, want a capacity error", err)
	}
	if err := claim(core, "a-front-of-its-own", "third", "enormous-"+strings.Repeat("x", 40)); err == nil {
		t.Fatal("a size no node serves was claimed")
	}

	want := `
# HELP sandbox_operator_claims_total Warm-pool claims by front, size tier and outcome (claimed, or the failure's kind: capacity, invalid, unavailable, …).
# TYPE sandbox_operator_claims_total counter
sandbox_operator_claims_total{front="e2b",outcome="claimed",tier="small"} 1
sandbox_operator_claims_total{front="kubernetes",outcome="capacity",tier="small"} 1
sandbox_operator_claims_total{front="other",outcome="capacity",tier="other"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_claims_total"); err != nil {
		got, _ := testutil.GatherAndCount(reg, "sandbox_operator_claims_total")
		t.Fatalf("claims counted wrong (%d series): %v", got, err)
	}
	if n, err := testutil.GatherAndCount(reg, "sandbox_operator_claim_duration_seconds"); err != nil || n != 3 {
		t.Fatalf("claim durations: %d series (%v), want one per front, tier and outcome: 3", n, err)
	}
}

// TestClaimSeriesStayFlat: a thousand claims under a thousand names add no
// series: no label carries a sandbox's name or id.
func TestClaimSeriesStayFlat(t *testing.T) {
	reg := metrics.NewRegistry()
	claims := metrics.NewClaims(reg)
	core := coreOverOneNode(t, claims, 1)
	if err := claim(core, metrics.FrontKubernetes, "only", "small"); err != nil {
		t.Fatal(err)
	}
	before, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		// The node is at its max_claims now: every claim fails the same
		// way, fast.
		_ = claim(core, metrics.FrontKubernetes, fmt.Sprintf("sandbox-%d", i), "small")
	}
	after, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	// The first failed claim adds its outcome's two series; nothing after.
	if after != before+2 {
		t.Fatalf("series went from %d to %d over 1000 claims under distinct names, want %d", before, after, before+2)
	}
}

// TestClaimsRegisteredTwiceShareSeries: a process that builds its parts
// twice against one registry (the Kubernetes libraries keep a global one)
// counts into the same series instead of failing to start.
func TestClaimsRegisteredTwiceShareSeries(t *testing.T) {
	reg := metrics.NewRegistry()
	first, second := metrics.NewClaims(reg), metrics.NewClaims(reg)
	first.ObserveClaim(metrics.FrontE2B, smallKey, time.Millisecond, nil)
	second.ObserveClaim(metrics.FrontE2B, smallKey, time.Millisecond, nil)
	want := `
# HELP sandbox_operator_claims_total Warm-pool claims by front, size tier and outcome (claimed, or the failure's kind: capacity, invalid, unavailable, …).
# TYPE sandbox_operator_claims_total counter
sandbox_operator_claims_total{front="e2b",outcome="claimed",tier="small"} 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_claims_total"); err != nil {
		t.Fatal(err)
	}
}
