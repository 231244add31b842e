package metrics_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/namehold"
)

// The holds' Observer, asserted here rather than in the package so that
// the metrics package does not link the holds.
var _ namehold.Observer = (*metrics.NameHolds)(nil)

const nameHoldsExposition = `
# HELP sandbox_operator_name_hold_conflicts_total Sandbox creates refused (409 AlreadyExists) because another replica holds the name: its create is in flight or not yet published. A name refused because the inventory shows it, or because this replica is creating it already, is not counted here.
# TYPE sandbox_operator_name_hold_conflicts_total counter
sandbox_operator_name_hold_conflicts_total %d
# HELP sandbox_operator_name_hold_waits_total Sandbox creates whose name hold waited on another replica: the write of the hold lost the compare-and-set on its shard ConfigMap to another replica's write and was read and retried. A held name is never waited for; see name_hold_conflicts_total.
# TYPE sandbox_operator_name_hold_waits_total counter
sandbox_operator_name_hold_waits_total %d
`

// TestNameHoldsCountConflictsAndWaits: each refused Acquire is one
// conflict, and a contended write counts every Acquire it carried as a
// wait; two processes' parts share the series.
func TestNameHoldsCountConflictsAndWaits(t *testing.T) {
	reg := metrics.NewRegistry()
	first, second := metrics.NewNameHolds(reg), metrics.NewNameHolds(reg)
	want := func(conflicts, waits int) *strings.Reader {
		return strings.NewReader(fmt.Sprintf(nameHoldsExposition, conflicts, waits))
	}
	names := []string{"sandbox_operator_name_hold_conflicts_total", "sandbox_operator_name_hold_waits_total"}
	if err := testutil.GatherAndCompare(reg, want(0, 0), names...); err != nil {
		t.Fatalf("before anything happened: %v", err)
	}
	first.ObserveHeld()
	second.ObserveHeld()
	first.ObserveContended(3)
	second.ObserveContended(1)
	if err := testutil.GatherAndCompare(reg, want(2, 4), names...); err != nil {
		t.Fatal(err)
	}
	// However many names are refused, the series stay the two.
	for range 1000 {
		first.ObserveHeld()
	}
	if n, err := testutil.GatherAndCount(reg, names...); err != nil || n != 2 {
		t.Fatalf("name-hold series: %d (%v), want 2", n, err)
	}
}
