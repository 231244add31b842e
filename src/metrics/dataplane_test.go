package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// dataPlaneNames are every data-plane metric.
var dataPlaneNames = []string{
	"sandbox_operator_dataplane_requests_total",
	"sandbox_operator_dataplane_bytes_total",
	"sandbox_operator_dataplane_relay_dial_duration_seconds",
	"sandbox_operator_dataplane_relay_dial_failures_total",
	"sandbox_operator_dataplane_open_streams",
}

// seriesOf is name's series in reg, by the value of their one label
// (none: ""): a counter's or gauge's value, a histogram's count.
func seriesOf(t *testing.T, reg prometheus.Gatherer, name string) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			key := ""
			switch labels := m.GetLabel(); len(labels) {
			case 0:
			case 1:
				key = labels[0].GetValue()
			default:
				t.Fatalf("%s has a series with %d labels", name, len(labels))
			}
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[key] = m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func labelValues(series map[string]float64) []string {
	out := make([]string, 0, len(series))
	for k := range series {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// TestDataPlaneLabelSets: every label has exactly its fixed set of
// values, there from the start, and a status or a cause outside its set
// is counted as "other" rather than under its own value.
func TestDataPlaneLabelSets(t *testing.T) {
	reg := prometheus.NewRegistry()
	dp := metrics.NewDataPlane(reg)

	dp.ObserveRequest(http.StatusOK)
	dp.ObserveRequest(http.StatusOK)
	dp.ObserveRequest(http.StatusBadGateway)
	dp.ObserveRequest(http.StatusTeapot)
	dp.ObserveRequest(599)
	dp.ObserveDial(time.Millisecond, envdproxy.NoDialFailure)
	dp.ObserveDial(2*time.Millisecond, envdproxy.DialNotListening)
	dp.ObserveDial(3*time.Millisecond, envdproxy.DialFailure("a cause of its own"))
	dp.ObserveBytes(envdproxy.ToSandbox, 10)
	dp.ObserveBytes(envdproxy.FromSandbox, 20)
	dp.ObserveBytes(envdproxy.FromSandbox, 5)
	dp.ObserveBytes(envdproxy.Direction("sideways"), 1000)
	dp.ObserveRelayOpened()
	dp.ObserveRelayOpened()
	dp.ObserveRelayClosed()

	requests := seriesOf(t, reg, "sandbox_operator_dataplane_requests_total")
	wantCodes := []string{"101", "200", "201", "204", "206", "301", "302", "304", "400", "401", "403", "404", "405", "408", "409", "413", "429", "500", "502", "503", "504", "other"}
	slices.Sort(wantCodes)
	if got := labelValues(requests); !slices.Equal(got, wantCodes) {
		t.Errorf("code label values %q, want %q", got, wantCodes)
	}
	if requests["200"] != 2 || requests["502"] != 1 || requests["other"] != 2 || requests["404"] != 0 {
		t.Errorf("requests by code: %v; want 200: 2, 502: 1, other: 2 (418 and 599), the rest 0", requests)
	}

	causes := seriesOf(t, reg, "sandbox_operator_dataplane_relay_dial_failures_total")
	wantCauses := []string{"node_unreachable", "not_listening", "other", "refused", "sandbox_gone", "timeout"}
	if got := labelValues(causes); !slices.Equal(got, wantCauses) {
		t.Errorf("cause label values %q, want %q", got, wantCauses)
	}
	if causes["not_listening"] != 1 || causes["other"] != 1 || causes["refused"] != 0 {
		t.Errorf("dial failures by cause: %v; want not_listening: 1, other: 1 (the unknown cause)", causes)
	}

	want := `
# HELP sandbox_operator_dataplane_bytes_total Bytes the data plane's relays carried, to_sandbox (client to guest) or from_sandbox (guest to client), HTTP heads and framing included.
# TYPE sandbox_operator_dataplane_bytes_total counter
sandbox_operator_dataplane_bytes_total{direction="from_sandbox"} 25
sandbox_operator_dataplane_bytes_total{direction="to_sandbox"} 10
# HELP sandbox_operator_dataplane_open_streams Guest-port relays the data plane holds open now: requests and upgraded connections in flight to a guest.
# TYPE sandbox_operator_dataplane_open_streams gauge
sandbox_operator_dataplane_open_streams 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want),
		"sandbox_operator_dataplane_bytes_total", "sandbox_operator_dataplane_open_streams"); err != nil {
		t.Error(err)
	}
	dials := seriesOf(t, reg, "sandbox_operator_dataplane_relay_dial_duration_seconds")
	if len(dials) != 2 || dials["ok"] != 1 || dials["failed"] != 2 {
		t.Errorf("dials timed by outcome: %v, want ok: 1, failed: 2", dials)
	}
}

// TestDataPlaneSeriesStayFlat relays through a real proxy over a
// simulated node to several sandboxes, and asks it for a thousand that do
// not exist: no series is added, since no label carries a sandbox.
func TestDataPlaneSeriesStayFlat(t *testing.T) {
	const sandboxes, unknown = 5, 1000
	secret := []byte("dataplane-test-envd-secret")
	sim, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 1, RootToken: rootToken, RefillDelay: time.Millisecond, ReapInterval: time.Hour,
		Pools: []sandboxd.PoolSpec{{Template: smallKey.Template, Warm: sandboxes}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sim.Close() })
	n := sim.Node(0)
	if err := n.WaitWarm(context.Background(), smallKey, sandboxes); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	proxy, err := envdproxy.New(envdproxy.Config{
		Locator: everyIDOn(n.Addr()), Domain: "sandbox.test", Secret: secret, Token: rootToken,
		Observer: metrics.NewDataPlane(reg),
	})
	if err != nil {
		t.Fatal(err)
	}
	before, err := testutil.GatherAndCount(reg, dataPlaneNames...)
	if err != nil {
		t.Fatal(err)
	}

	root, err := sandboxd.New(n.Addr(), sandboxd.WithToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	serve := func(port int, id, token string) int {
		req := httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/", nil)
		req.Host = strconv.Itoa(port) + "-" + strings.Replace(id, "_", "-", 1) + ".sandbox.test"
		req.Header.Set(envdproxy.HeaderAccessToken, token)
		rec := httptest.NewRecorder()
		proxy.ServeHTTP(rec, req)
		return rec.Code
	}
	for i := range sandboxes {
		cl, err := root.Claim(t.Context(), sandboxd.ClaimRequest{Template: smallKey.Template, ClaimRef: fmt.Sprintf("team/sb-%d", i), NoRedirect: true})
		if err != nil {
			t.Fatal(err)
		}
		token := envdtoken.Derive(secret, cl.Token)
		if code := serve(simfleet.DefaultEchoPort, cl.ID, token); code != http.StatusOK {
			t.Fatalf("sandbox %d's echo port: %d", i, code)
		}
		if code := serve(9, cl.ID, token); code != http.StatusBadGateway {
			t.Fatalf("sandbox %d's port with nothing listening: %d", i, code)
		}
	}
	for i := range unknown {
		if code := serve(simfleet.DefaultEchoPort, fmt.Sprintf("sb_%020d", i), "00"); code != http.StatusBadGateway {
			t.Fatalf("unknown sandbox %d: %d", i, code)
		}
	}

	after, err := testutil.GatherAndCount(reg, dataPlaneNames...)
	if err != nil {
		t.Fatal(err)
	}
	if after != before {
		t.Fatalf("series went from %d to %d over %d sandboxes and %d unknown ids, want no change", before, after, sandboxes, unknown)
	}
	requests := seriesOf(t, reg, "sandbox_operator_dataplane_requests_total")
	if requests["200"] != sandboxes || requests["502"] != sandboxes+unknown {
		t.Fatalf("requests by code: %v; want 200: %d, 502: %d", requests, sandboxes, sandboxes+unknown)
	}
	if causes := seriesOf(t, reg, "sandbox_operator_dataplane_relay_dial_failures_total"); causes["not_listening"] != sandboxes {
		t.Fatalf("dial failures by cause: %v; want not_listening: %d", causes, sandboxes)
	}
}

// TestDataPlaneRegisteredTwiceSharesSeries: a process that builds its
// data plane twice against one registry counts into the same series.
func TestDataPlaneRegisteredTwiceSharesSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, second := metrics.NewDataPlane(reg), metrics.NewDataPlane(reg)
	first.ObserveRelayOpened()
	second.ObserveRelayOpened()
	want := `
# HELP sandbox_operator_dataplane_open_streams Guest-port relays the data plane holds open now: requests and upgraded connections in flight to a guest.
# TYPE sandbox_operator_dataplane_open_streams gauge
sandbox_operator_dataplane_open_streams 2
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "sandbox_operator_dataplane_open_streams"); err != nil {
		t.Fatal(err)
	}
}

// everyIDOn is a Locator that places every id on the node at addr: an id
// the node does not hold is read from it and found missing, as a stale
// listing would be.
type everyIDOn string

func (a everyIDOn) Owner(string) (string, bool) { return string(a), true }
func (a everyIDOn) Nodes() []string             { return []string{string(a)} }
