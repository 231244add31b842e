package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// The fronts a claim comes through, as the front label says them.
const (
	// FrontKubernetes is the Sandbox API (sandbox-apiserver).
	FrontKubernetes = "kubernetes"
	// FrontE2B is the e2b surface (sandbox-e2b, or sandbox-apiserver's
	// --enable-e2b-api).
	FrontE2B = "e2b"
)

// OutcomeClaimed is the outcome label of a claim that got a sandbox; a
// failed claim's outcome is its fleet.Kind ("capacity", "invalid", …).
const OutcomeClaimed = "claimed"

// other is the label value of a front or size outside its fixed set.
const other = "other"

// claimBuckets span a warm claim on one node (milliseconds) to a claim
// that tried every candidate node within their timeouts (seconds).
var claimBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// Claims counts warm-pool claims and times them, by front, size tier and
// outcome.
type Claims struct {
	total   *prometheus.CounterVec
	seconds *prometheus.HistogramVec
}

// NewClaims registers the claim metrics with reg.
func NewClaims(reg prometheus.Registerer) *Claims {
	labels := []string{"front", "tier", "outcome"}
	c := &Claims{
		total: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: Namespace, Name: "claims_total",
			Help: "Warm-pool claims by front, size tier and outcome (claimed, or the failure's kind: capacity, invalid, unavailable, …).",
		}, labels),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "claim_duration_seconds",
			Help:    "How long warm-pool claims took, from the front's call to the fleet core to its answer, by front, size tier and outcome.",
			Buckets: claimBuckets,
		}, labels),
	}
	c.total, c.seconds = register(reg, c.total), register(reg, c.seconds)
	return c
}

// ObserveClaim is the fleet core's ClaimObserver.
func (c *Claims) ObserveClaim(front string, key sandbox.PoolKey, took time.Duration, err error) {
	if front != FrontKubernetes && front != FrontE2B {
		front = other
	}
	tier := key.Size
	if _, ok := sandbox.SizeOf(tier); !ok {
		tier = other
	}
	outcome := OutcomeClaimed
	if err != nil {
		outcome = fleet.Classify(err).String()
	}
	c.total.WithLabelValues(front, tier, outcome).Inc()
	c.seconds.WithLabelValues(front, tier, outcome).Observe(took.Seconds())
}

var _ fleet.ClaimObserver = (*Claims)(nil)
