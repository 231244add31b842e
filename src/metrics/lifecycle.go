package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
)

// operationBuckets span a node-local verb (a wake, a renew: milliseconds)
// to a hibernate, checkpoint or fork of a large guest (seconds).
var operationBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Lifecycle counts and times the lifecycle operations the fleet core runs
// on existing sandboxes: pauses, resumes, renewals, forks, checkpoints,
// releases and claims branched from a checkpoint.
type Lifecycle struct {
	total   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

// NewLifecycle registers the lifecycle metrics with reg.
func NewLifecycle(reg prometheus.Registerer) *Lifecycle {
	l := &Lifecycle{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "lifecycle_operations_total",
			Help: "Lifecycle operations on existing sandboxes (pause, resume, renew, fork, checkpoint, release, checkpoint_claim) by outcome (ok, or the failure's kind).",
		}, []string{"operation", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "lifecycle_operation_duration_seconds",
			Help:    "How long lifecycle operations took, node round trips included, by operation.",
			Buckets: operationBuckets,
		}, []string{"operation"}),
	}
	l.total, l.seconds = register(reg, l.total), register(reg, l.seconds)
	return l
}

// OutcomeOK is the outcome label of an operation that succeeded.
const OutcomeOK = "ok"

// ObserveOperation is the fleet core's OperationObserver.
func (l *Lifecycle) ObserveOperation(op fleet.Operation, took time.Duration, err error) {
	name := string(op)
	if !slices.Contains(fleet.Operations, op) {
		name = other
	}
	outcome := OutcomeOK
	if err != nil {
		outcome = fleet.Classify(err).String()
	}
	l.total.WithLabelValues(name, outcome).Inc()
	l.seconds.WithLabelValues(name).Observe(took.Seconds())
}

var _ fleet.OperationObserver = (*Lifecycle)(nil)
