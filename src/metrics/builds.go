package metrics

import (
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
)

// buildBuckets span a template build of a step or two on a warm sandbox
// (seconds) to one that runs into the default build timeout (30 minutes).
var buildBuckets = []float64{1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600}

// Builds counts and times the e2b surface's template builds and shows how
// many wait for a build slot and how many run.
//
// The two gauges are set to the build manager's own counts, which it
// reports under its lock after every change (build.Observer.ObserveSlots),
// so the last value set is the state now: they cannot drift the way
// increments and decrements on separate paths do when one path is missed.
// A collector reading a Manager at scrape time could not drift either,
// but it would tie the registry to one Manager, and register hands a
// process that builds its parts twice the first one's collector, which
// would go on reading a closed Manager; gauges are set by whichever
// Manager runs.
type Builds struct {
	total   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
	queued  prometheus.Gauge
	running prometheus.Gauge
}

// NewBuilds registers the build metrics with reg.
func NewBuilds(reg prometheus.Registerer) *Builds {
	b := &Builds{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "builds_total",
			Help: "Template builds that were started (handed their definition) and ended, by outcome: ready, error (a step failed, the timeout passed, or the server stopped), canceled (the template was deleted).",
		}, []string{"outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "build_duration_seconds",
			Help:    "How long ended template builds ran, from getting a build slot to their end (the wait in the queue excluded; 0 for a build that ended while queued), by outcome.",
			Buckets: buildBuckets,
		}, []string{"outcome"}),
		queued: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "build_queue_length",
			Help: "Started template builds waiting for a build slot in this process.",
		}),
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: Namespace, Name: "builds_running",
			Help: "Template builds running in this process.",
		}),
	}
	b.total, b.seconds = register(reg, b.total), register(reg, b.seconds)
	b.queued, b.running = register(reg, b.queued), register(reg, b.running)
	// Every outcome is a series from the start, so a rate over the first
	// failure starts from 0 rather than from nothing.
	for _, o := range build.Outcomes {
		b.total.WithLabelValues(string(o))
		b.seconds.WithLabelValues(string(o))
	}
	return b
}

// ObserveBuild is the build manager's Observer: a started build ended.
func (b *Builds) ObserveBuild(outcome build.Outcome, ran time.Duration) {
	label := string(outcome)
	if !slices.Contains(build.Outcomes, outcome) {
		label = other
	}
	b.total.WithLabelValues(label).Inc()
	b.seconds.WithLabelValues(label).Observe(ran.Seconds())
}

// ObserveSlots is the build manager's Observer: the builds waiting and
// running now.
func (b *Builds) ObserveSlots(queued, running int) {
	b.queued.Set(float64(queued))
	b.running.Set(float64(running))
}

var _ build.Observer = (*Builds)(nil)
