package metrics

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// The reasons a front refuses a request, as the reason label says them.
const (
	// ReasonRateLimit: the caller's create rate was spent (429).
	ReasonRateLimit = "rate_limit"
	// ReasonSandboxCap: the caller's namespace holds its most live
	// sandboxes (429).
	ReasonSandboxCap = "sandbox_cap"
	// ReasonQuota: a namespace's snapshots or uploads are at their bound
	// (429, 413).
	ReasonQuota = "quota"
	// ReasonValidation: the request itself was wrong (400, 422).
	ReasonValidation = "validation"
	// ReasonCapacity: no warm VM could be claimed for it (429).
	ReasonCapacity = "capacity"
)

var reasons = []string{ReasonRateLimit, ReasonSandboxCap, ReasonQuota, ReasonValidation, ReasonCapacity}

// Refusals counts the requests a front refused, by reason: what the
// callers were told no, and why, apart from authentication.
type Refusals struct {
	front string
	total *prometheus.CounterVec
}

// NewRefusals registers the refusal counter with reg, for front
// (FrontKubernetes or FrontE2B). Every reason's series exists from the
// start at zero, so a rate over it is defined before the first refusal.
func NewRefusals(reg prometheus.Registerer, front string) *Refusals {
	if front != FrontKubernetes && front != FrontE2B {
		front = other
	}
	r := &Refusals{front: front, total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "refusals_total",
		Help: "Requests a front refused, by front and reason: rate_limit, sandbox_cap, quota, validation, capacity.",
	}, []string{"front", "reason"})}
	r.total = register(reg, r.total)
	for _, reason := range reasons {
		r.total.WithLabelValues(front, reason)
	}
	return r
}

// Refused counts one refusal for reason; a nil Refusals counts nothing,
// and a reason outside the set counts as "other".
func (r *Refusals) Refused(reason string) {
	if r == nil {
		return
	}
	if !slices.Contains(reasons, reason) {
		reason = other
	}
	r.total.WithLabelValues(r.front, reason).Inc()
}
