package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// listBuckets span a list answered from memory (sub-millisecond) to one
// that read every node's claim labels of a large fleet (seconds).
var listBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// Lists times the sandbox lists a front answers, and the sandboxes each
// answered. The Kubernetes front's lists and watches are measured by the
// Kubernetes apiserver library it is built on (apiserver_request_duration_seconds
// and apiserver_longrunning_requests for resource="sandboxes"), so only
// the e2b surface uses this.
type Lists struct {
	seconds *prometheus.HistogramVec
	items   *prometheus.HistogramVec
	front   string
}

// NewLists registers the list metrics with reg, for front.
func NewLists(reg prometheus.Registerer, front string) *Lists {
	if front != FrontKubernetes && front != FrontE2B {
		front = other
	}
	l := &Lists{
		front: front,
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "list_duration_seconds",
			Help:    "How long a front took to answer a list of sandboxes (one page), by front.",
			Buckets: listBuckets,
		}, []string{"front"}),
		items: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: Namespace, Name: "list_items",
			Help:    "Sandboxes the fleet listed for one list request, before filters and paging, by front.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 9), // 1 … 65 536
		}, []string{"front"}),
	}
	l.seconds, l.items = register(reg, l.seconds), register(reg, l.items)
	return l
}

// ObserveList records one list: how long it took and how many sandboxes
// the fleet listed for it. A nil Lists records nothing.
func (l *Lists) ObserveList(took time.Duration, items int) {
	if l == nil {
		return
	}
	l.seconds.WithLabelValues(l.front).Observe(took.Seconds())
	l.items.WithLabelValues(l.front).Observe(float64(items))
}
