package metrics_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/warmpool"
)

// The driver's Observer, asserted here rather than in the package so
// that the metrics package does not link the driver.
var _ warmpool.Observer = (*metrics.WarmPool)(nil)

const warmPoolHelp = `
# HELP sandbox_operator_warmpool_leader 1 while this replica drives the warm pools (it holds the warm-pool driver's Lease and its caches synced), 0 otherwise.
# TYPE sandbox_operator_warmpool_leader gauge
sandbox_operator_warmpool_leader %d
# HELP sandbox_operator_warmpool_node_pushes_total Pool sets the warm-pool driver sent to nodes (PUT /v1/pools) by outcome: ok, or error when the node refused it, did not answer in time or could not be reached.
# TYPE sandbox_operator_warmpool_node_pushes_total counter
sandbox_operator_warmpool_node_pushes_total{outcome="error"} %d
sandbox_operator_warmpool_node_pushes_total{outcome="ok"} %d
# HELP sandbox_operator_warmpool_reconciles_total Warm-pool driver reconcile passes (SandboxWarmPools to every node's pool set) by outcome: ok, or error when the SandboxWarmPools or their templates could not be read. A node refusing its set does not fail a pass (see warmpool_node_pushes_total); a pass cut short by losing the lease is not counted.
# TYPE sandbox_operator_warmpool_reconciles_total counter
sandbox_operator_warmpool_reconciles_total{outcome="error"} %d
sandbox_operator_warmpool_reconciles_total{outcome="ok"} %d
`

// warmPoolWant is the exposition of the driver's counters and gauge with
// the leader gauge, failed and good pushes, failed and good passes.
func warmPoolWant(leader, pushErr, pushOK, passErr, passOK int) *strings.Reader {
	return strings.NewReader(fmt.Sprintf(warmPoolHelp, leader, pushErr, pushOK, passErr, passOK))
}

var warmPoolNames = []string{
	"sandbox_operator_warmpool_leader", "sandbox_operator_warmpool_node_pushes_total", "sandbox_operator_warmpool_reconciles_total",
}

// TestWarmPoolCountsPassesPushesAndLeadership: both outcomes of passes
// and pushes are series at 0 before anything happened, each observation
// counts under its own, every pass is timed, and the leader gauge follows
// the last turn.
func TestWarmPoolCountsPassesPushesAndLeadership(t *testing.T) {
	reg := metrics.NewRegistry()
	w := metrics.NewWarmPool(reg)
	if err := testutil.GatherAndCompare(reg, warmPoolWant(0, 0, 0, 0, 0), warmPoolNames...); err != nil {
		t.Fatalf("before anything happened: %v", err)
	}

	w.ObserveLeading(true)
	w.ObservePass(20*time.Millisecond, nil)
	w.ObservePush(nil)
	w.ObservePush(nil)
	w.ObservePush(errors.New("PUT /v1/pools: 401"))
	w.ObservePass(time.Second, errors.New("listing SandboxWarmPools: the server is unreachable"))
	if err := testutil.GatherAndCompare(reg, warmPoolWant(1, 1, 2, 1, 1), warmPoolNames...); err != nil {
		t.Fatalf("while leading: %v", err)
	}
	w.ObserveLeading(false)
	if err := testutil.GatherAndCompare(reg, warmPoolWant(0, 1, 2, 1, 1), warmPoolNames...); err != nil {
		t.Fatalf("after the lease was lost: %v", err)
	}
	if n, err := testutil.GatherAndCount(reg, "sandbox_operator_warmpool_reconcile_duration_seconds"); err != nil || n != 1 {
		t.Fatalf("reconcile durations: %d series (%v), want 1 (no labels)", n, err)
	}
}

// TestWarmPoolSeriesStayFlat: a thousand failed pushes with a thousand
// different errors (each naming its node) add no series.
func TestWarmPoolSeriesStayFlat(t *testing.T) {
	reg := metrics.NewRegistry()
	w := metrics.NewWarmPool(reg)
	before, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 1000 {
		err := errors.New("PUT /v1/pools on node-" + strings.Repeat("x", i%50) + ": refused")
		w.ObservePush(err)
		w.ObservePass(time.Duration(i)*time.Millisecond, err)
	}
	after, err := testutil.GatherAndCount(reg)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("series went from %d to %d over 1000 distinct failures, want no new series", before, after)
	}
}
