package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// outcomeError is the outcome label of a warm-pool pass or push that
// failed.
const outcomeError = "error"

// reconcileBuckets span a pass over a few nodes whose sets did not change
// (milliseconds) to one that PUT a large fleet, each PUT bounded by the
// driver's 10 s timeout.
var reconcileBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}

// WarmPool counts the warm-pool driver's reconcile passes and PUTs to the
// nodes, and shows whether this replica drives. It implements
// warmpool.Observer; the assertion is in the tests, so that the metrics
// package, which every binary links, does not link the driver's
// controller-runtime manager.
type WarmPool struct {
	reconciles *prometheus.CounterVec
	seconds    prometheus.Histogram
	pushes     *prometheus.CounterVec
	leader     prometheus.Gauge
}

// NewWarmPool registers the warm-pool driver's metrics with reg.
func NewWarmPool(reg prometheus.Registerer) *WarmPool {
	w := &WarmPool{
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "warmpool_reconciles_total",
			Help: "Warm-pool driver reconcile passes (SandboxWarmPools to every node's pool set) by outcome: ok, or error when the SandboxWarmPools or their templates could not be read. A node refusing its set does not fail a pass (see warmpool_node_pushes_total); a pass cut short by losing the lease is not counted.",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "warmpool_reconcile_duration_seconds",
			Help:    "How long the warm-pool driver's counted reconcile passes took, PUTs to the nodes and status writes included.",
			Buckets: reconcileBuckets,
		}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "warmpool_node_pushes_total",
			Help: "Pool sets the warm-pool driver sent to nodes (PUT /v1/pools) by outcome: ok, or error when the node refused it, did not answer in time or could not be reached.",
		}, []string{"outcome"}),
		leader: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "warmpool_leader",
			Help: "1 while this replica drives the warm pools (it holds the warm-pool driver's Lease and its caches synced), 0 otherwise.",
		}),
	}
	w.reconciles, w.seconds = register(reg, w.reconciles), register(reg, w.seconds)
	w.pushes, w.leader = register(reg, w.pushes), register(reg, w.leader)
	for _, outcome := range []string{OutcomeOK, outcomeError} {
		w.reconciles.WithLabelValues(outcome)
		w.pushes.WithLabelValues(outcome)
	}
	return w
}

// ObservePass is the warm-pool driver's Observer: a reconcile pass ended.
func (w *WarmPool) ObservePass(took time.Duration, err error) {
	w.reconciles.WithLabelValues(okOrError(err)).Inc()
	w.seconds.Observe(took.Seconds())
}

// ObservePush is the warm-pool driver's Observer: a PUT of a node's pool
// set ended.
func (w *WarmPool) ObservePush(err error) {
	w.pushes.WithLabelValues(okOrError(err)).Inc()
}

// ObserveLeading is the warm-pool driver's Observer: this replica started
// or stopped driving.
func (w *WarmPool) ObserveLeading(leading bool) {
	if leading {
		w.leader.Set(1)
	} else {
		w.leader.Set(0)
	}
}

func okOrError(err error) string {
	if err != nil {
		return outcomeError
	}
	return OutcomeOK
}
