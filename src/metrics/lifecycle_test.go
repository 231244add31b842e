package metrics_test

import (
	"context"
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

// TestLifecycleOperationsCounted: a real fleet core over a simulated node
// pauses, resumes and releases a sandbox it claimed, then releases it
// again; each operation is counted under its outcome (the second release
// is not_found) and timed.
func TestLifecycleOperationsCounted(t *testing.T) {
	ctx := context.Background()
	sim, err := simfleet.Start(ctx, simfleet.Config{
		Nodes: 1, RootToken: rootToken, EchoPorts: []int{}, RefillDelay: time.Millisecond,
		Pools: []sandboxd.PoolSpec{{Template: smallKey.Template, Warm: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	n := sim.Node(0)
	if err := n.WaitWarm(ctx, smallKey, 1); err != nil {
		t.Fatal(err)
	}
	reg := metrics.NewRegistry()
	core, err := fleet.New(fleet.Config{
		View:              view{{Name: n.Name(), Addr: n.Addr(), Warm: map[sandbox.PoolKey]int{smallKey: 1}}},
		Token:             rootToken,
		OperationObserver: metrics.NewLifecycle(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)

	c, err := core.Claim(ctx, fleet.ClaimRequest{Ref: sandbox.ClaimRef{Namespace: "team", Name: "one"}, Key: smallKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		name string
		do   func() error
	}{
		{"pause", func() error { return core.Pause(ctx, c.Sandbox) }},
		{"resume", func() error { return core.Resume(ctx, c.Sandbox) }},
		{"release", func() error { return core.Release(ctx, c.Sandbox) }},
	} {
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
	}
	if err := core.Release(ctx, c.Sandbox); fleet.Classify(err) != fleet.KindNotFound {
		t.Fatalf("a second release = %v, want not found", err)
	}

	want := `
# HELP sandbox_operator_lifecycle_operations_total Lifecycle operations on existing sandboxes (pause, resume, renew, fork, checkpoint, release, checkpoint_claim) by outcome (ok, or the failure's kind).
# TYPE sandbox_operator_lifecycle_operations_total counter
sandbox_operator_lifecycle_operations_total{operation="pause",outcome="ok"} 1
sandbox_operator_lifecycle_operations_total{operation="release",outcome="not_found"} 1
sandbox_operator_lifecycle_operations_total{operation="release",outcome="ok"} 1
sandbox_operator_lifecycle_operations_total{operation="resume",outcome="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_lifecycle_operations_total"); err != nil {
		t.Fatal(err)
	}
	if n, err := testutil.GatherAndCount(reg, "sandbox_operator_lifecycle_operation_duration_seconds"); err != nil || n != 3 {
		t.Fatalf("operation durations: %d series (%v), want one per operation: 3", n, err)
	}
}

// TestLifecycleUnknownOperation: an operation outside the core's set is
// counted as "other", never under the caller's string.
func TestLifecycleUnknownOperation(t *testing.T) {
	reg := metrics.NewRegistry()
	l := metrics.NewLifecycle(reg)
	l.ObserveOperation(fleet.Operation("explode-"+strings.Repeat("x", 10)), time.Millisecond, nil)
	want := `
# HELP sandbox_operator_lifecycle_operations_total Lifecycle operations on existing sandboxes (pause, resume, renew, fork, checkpoint, release, checkpoint_claim) by outcome (ok, or the failure's kind).
# TYPE sandbox_operator_lifecycle_operations_total counter
sandbox_operator_lifecycle_operations_total{operation="other",outcome="ok"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_lifecycle_operations_total"); err != nil {
		t.Fatal(err)
	}
}
