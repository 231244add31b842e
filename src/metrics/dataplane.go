package metrics

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
)

// requestCodes are the statuses the requests counter names: the proxy's
// own answers (400, 401, 404, 408, 413, 429, 502) and what guests commonly
// answer. Any other status is counted as "other".
var requestCodes = []int{
	101, 200, 201, 204, 206, 301, 302, 304,
	400, 401, 403, 404, 405, 408, 409, 413, 429,
	500, 502, 503, 504,
}

// dialCauses are the cause label's values besides "other".
var dialCauses = []envdproxy.DialFailure{
	envdproxy.DialNodeUnreachable, envdproxy.DialNotListening, envdproxy.DialSandboxGone,
	envdproxy.DialRefused, envdproxy.DialTimeout,
}

// dialBuckets span a relay to a running guest on a nearby node (a
// millisecond or less) to one whose dial woke a hibernated sandbox or
// waited out the handshake's 30 s bound.
var dialBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}

// The dial outcome label's values.
const (
	outcomeOpened = "ok"
	outcomeFailed = "failed"
)

// DataPlane counts what the e2b data plane (package envdproxy) carries:
// requests by status, bytes each way, relay dials by outcome and cause,
// and the relays open now.
//
// The catalog's sandbox_operator_dataplane_wakes_total is not here: the
// proxy cannot tell whether a request reached a paused sandbox. Its
// Locator names only a node, and sandboxd's relay answers 101 alike
// whether or not it woke the sandbox, so any count would be a guess.
//
// Every series is made when DataPlane is built, and each request finds
// its counters in maps of those: the hot path builds no label values.
type DataPlane struct {
	requests      map[int]prometheus.Counter
	otherRequests prometheus.Counter
	toSandbox     prometheus.Counter
	fromSandbox   prometheus.Counter
	dialOK        prometheus.Observer
	dialFailed    prometheus.Observer
	failures      map[envdproxy.DialFailure]prometheus.Counter
	otherFailures prometheus.Counter
	openStreams   prometheus.Gauge
}

// NewDataPlane registers the data-plane metrics with reg.
func NewDataPlane(reg prometheus.Registerer) *DataPlane {
	requests := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "dataplane_requests_total",
		Help: "Requests the data plane answered, by the HTTP status the client got (101 for an upgrade); statuses outside a fixed set are \"other\". The proxy's /healthz is not counted.",
	}, []string{"code"}))
	bytes := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "dataplane_bytes_total",
		Help: "Bytes the data plane's relays carried, to_sandbox (client to guest) or from_sandbox (guest to client), HTTP heads and framing included.",
	}, []string{"direction"}))
	dials := register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: Namespace, Name: "dataplane_relay_dial_duration_seconds",
		Help:    "How long opening a node's guest-port relay took (connect and handshake; waking a paused sandbox on the active path included), by outcome: ok or failed.",
		Buckets: dialBuckets,
	}, []string{"outcome"}))
	failures := register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: Namespace, Name: "dataplane_relay_dial_failures_total",
		Help: "Relay dials that opened no relay, by cause: node_unreachable, not_listening (nothing on the guest port), sandbox_gone, refused (by the node), timeout, other.",
	}, []string{"cause"}))
	open := register(reg, prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: Namespace, Name: "dataplane_open_streams",
		Help: "Guest-port relays the data plane holds open now: requests and upgraded connections in flight to a guest.",
	}))

	d := &DataPlane{
		requests:      make(map[int]prometheus.Counter, len(requestCodes)),
		otherRequests: requests.WithLabelValues(other),
		toSandbox:     bytes.WithLabelValues(string(envdproxy.ToSandbox)),
		fromSandbox:   bytes.WithLabelValues(string(envdproxy.FromSandbox)),
		dialOK:        dials.WithLabelValues(outcomeOpened),
		dialFailed:    dials.WithLabelValues(outcomeFailed),
		failures:      make(map[envdproxy.DialFailure]prometheus.Counter, len(dialCauses)),
		otherFailures: failures.WithLabelValues(other),
		openStreams:   open,
	}
	for _, code := range requestCodes {
		d.requests[code] = requests.WithLabelValues(strconv.Itoa(code))
	}
	for _, cause := range dialCauses {
		d.failures[cause] = failures.WithLabelValues(string(cause))
	}
	return d
}

// ObserveRequest is envdproxy's Observer.
func (d *DataPlane) ObserveRequest(code int) {
	c, ok := d.requests[code]
	if !ok {
		c = d.otherRequests
	}
	c.Inc()
}

// ObserveDial is envdproxy's Observer.
func (d *DataPlane) ObserveDial(took time.Duration, cause envdproxy.DialFailure) {
	if cause == envdproxy.NoDialFailure {
		d.dialOK.Observe(took.Seconds())
		return
	}
	d.dialFailed.Observe(took.Seconds())
	c, ok := d.failures[cause]
	if !ok {
		c = d.otherFailures
	}
	c.Inc()
}

// ObserveRelayOpened is envdproxy's Observer.
func (d *DataPlane) ObserveRelayOpened() { d.openStreams.Inc() }

// ObserveRelayClosed is envdproxy's Observer.
func (d *DataPlane) ObserveRelayClosed() { d.openStreams.Dec() }

// ObserveBytes is envdproxy's Observer. The proxy names no direction but
// its two; anything else is dropped rather than put on either.
func (d *DataPlane) ObserveBytes(dir envdproxy.Direction, n int) {
	switch dir {
	case envdproxy.ToSandbox:
		d.toSandbox.Add(float64(n))
	case envdproxy.FromSandbox:
		d.fromSandbox.Add(float64(n))
	}
}

var _ envdproxy.Observer = (*DataPlane)(nil)
