package envdproxy_test

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// The data-plane series the tests read.
const (
	requestsTotal = "sandbox_operator_dataplane_requests_total"
	bytesTotal    = "sandbox_operator_dataplane_bytes_total"
	dialSeconds   = "sandbox_operator_dataplane_relay_dial_duration_seconds"
	dialFailures  = "sandbox_operator_dataplane_relay_dial_failures_total"
	openStreams   = "sandbox_operator_dataplane_open_streams"
)

// headRoom bounds what a relay carries besides a body: the HTTP heads
// and chunk framing of one exchange.
const headRoom = 16 << 10

// observedEnv is newEnv with the metrics package's DataPlane as the
// proxy's Observer, registered with a registry of the test's own.
func observedEnv(t *testing.T, nodes int) (*env, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	dp := metrics.NewDataPlane(reg)
	return newEnv(t, envOptions{nodes: nodes, tune: func(c *envdproxy.Config) { c.Observer = dp }}), reg
}

// sample is reg's value of name's series whose one label has value
// labelValue ("" for a series without labels): a counter's or a gauge's
// value, a histogram's count of observations.
func sample(t *testing.T, reg prometheus.Gatherer, name, labelValue string) float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := m.GetLabel()
			if (labelValue == "" && len(labels) != 0) || (labelValue != "" && (len(labels) != 1 || labels[0].GetValue() != labelValue)) {
				continue
			}
			switch {
			case m.GetCounter() != nil:
				return m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				return m.GetGauge().GetValue()
			case m.GetHistogram() != nil:
				return float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	t.Fatalf("no series %s{%q}", name, labelValue)
	return 0
}

// TestObserverCountsRelayedTraffic sends a body up to a guest and fetches
// one down, through the proxy over a simulated node: each request is
// counted under its status, each relay's dial as ok, the bytes each way
// at least the body and at most a little more, and no relay stays open.
func TestObserverCountsRelayedTraffic(t *testing.T) {
	e, reg := observedEnv(t, 1)
	cl := e.claim(0, true)
	tok := withToken(accessToken(cl.Token))
	const up, down = 1 << 20, 3 << 20

	status, body, _ := e.do(http.MethodPost, host(bulkPort, cl.ID), "/", bytes.NewReader(make([]byte, up)), tok)
	if status != http.StatusOK || string(body) != strconv.Itoa(up) {
		t.Fatalf("upload: %d %q", status, body)
	}
	status, body, _ = e.do(http.MethodGet, host(bulkPort, cl.ID), "/bytes?n="+strconv.Itoa(down), nil, tok)
	if status != http.StatusOK || len(body) != down {
		t.Fatalf("download: %d, %d bytes", status, len(body))
	}
	// The client has its answer a moment before the handler returns and
	// the proxy counts the request.
	poll.Until(t, "both requests counted", func() bool { return sample(t, reg, requestsTotal, "200") == 2 })

	if to := sample(t, reg, bytesTotal, string(envdproxy.ToSandbox)); to < up || to > up+2*headRoom {
		t.Errorf("bytes to the sandbox = %v, want the %d-byte body and two requests' heads", to, up)
	}
	if from := sample(t, reg, bytesTotal, string(envdproxy.FromSandbox)); from < down || from > down+2*headRoom {
		t.Errorf("bytes from the sandbox = %v, want the %d-byte body and two answers' heads", from, down)
	}
	if ok, failed := sample(t, reg, dialSeconds, "ok"), sample(t, reg, dialSeconds, "failed"); ok != 2 || failed != 0 {
		t.Errorf("dials: %v ok, %v failed; want 2 ok", ok, failed)
	}
	// Each relay is closed before its request is counted.
	if open := sample(t, reg, openStreams, ""); open != 0 {
		t.Errorf("%v relays open after both requests ended, want 0", open)
	}
}

// TestObserverCountsAnOpenStream holds a full-duplex stream open through
// the proxy: its relay is counted open while the stream runs and no more
// once the client ends it.
func TestObserverCountsAnOpenStream(t *testing.T) {
	e, reg := observedEnv(t, 1)
	cl := e.claim(0, true)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url+"/duplex", pr)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host(duplexPort, cl.ID)
	req.Header.Set(envdproxy.HeaderAccessToken, accessToken(cl.Token))
	type answer struct {
		resp *http.Response
		err  error
	}
	answers := make(chan answer, 1)
	go func() {
		resp, err := e.hc.Do(req)
		answers <- answer{resp, err}
	}()
	if _, err := io.WriteString(pw, "ping\n"); err != nil {
		t.Fatal(err)
	}
	a := <-answers
	if a.err != nil {
		t.Fatal(a.err)
	}
	defer a.resp.Body.Close()
	line, err := bufio.NewReader(a.resp.Body).ReadString('\n')
	if err != nil || line != "echo:ping\n" {
		t.Fatalf("first line of the stream: %q, %v", line, err)
	}
	// The guest has answered through the relay, so it is open, and stays
	// open until the client ends the stream.
	if open := sample(t, reg, openStreams, ""); open != 1 {
		t.Fatalf("%v relays open mid-stream, want 1", open)
	}
	if err := pw.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, a.resp.Body); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the stream's relay to close", func() bool { return sample(t, reg, openStreams, "") == 0 })
	poll.Until(t, "the stream counted", func() bool { return sample(t, reg, requestsTotal, "200") == 1 })
}

// TestObserverCountsDialFailuresByCause drives a relay dial into each
// failure the simulated fleet can produce and checks its cause: nothing
// listening on the guest port, a sandbox released under a cached token,
// a paused sandbox on the passive path, and a node that is gone.
func TestObserverCountsDialFailuresByCause(t *testing.T) {
	e, reg := observedEnv(t, 2)
	live := e.claim(0, true)
	liveTok := withToken(accessToken(live.Token))

	// failsWith sends one request that must be answered 502 after a dial
	// that failed for cause: the failure is counted under it, timed as
	// failed, and the request counted as a 502.
	failures := 0
	failsWith := func(t *testing.T, cause envdproxy.DialFailure, hostName, path string, opts ...reqOpt) {
		t.Helper()
		status, body, _ := e.do(http.MethodGet, hostName, path, nil, opts...)
		if status != http.StatusBadGateway {
			t.Fatalf("status %d (%s), want 502", status, body)
		}
		failures++
		poll.Until(t, "the 502 counted", func() bool { return sample(t, reg, requestsTotal, "502") == float64(failures) })
		if got := sample(t, reg, dialFailures, string(cause)); got != 1 {
			t.Fatalf("%s failures = %v, want 1", cause, got)
		}
		if got := sample(t, reg, dialSeconds, "failed"); got != float64(failures) {
			t.Fatalf("dials timed as failed = %v, want %d", got, failures)
		}
	}

	t.Run("nothing listening in the guest", func(t *testing.T) {
		failsWith(t, envdproxy.DialNotListening, host(9, live.ID), "/", liveTok)
	})
	t.Run("sandbox released while its token is cached", func(t *testing.T) {
		gone := e.claim(0, true)
		goneTok := withToken(accessToken(gone.Token))
		if status, body, _ := e.do(http.MethodGet, host(echoPort, gone.ID), "/", nil, goneTok); status != http.StatusOK {
			t.Fatalf("before release: %d %s", status, body)
		}
		if err := e.root(0).Release(ctxT(t), gone.ID); err != nil {
			t.Fatal(err)
		}
		failsWith(t, envdproxy.DialSandboxGone, host(echoPort, gone.ID), "/", goneTok)
	})
	t.Run("paused, on the passive path", func(t *testing.T) {
		paused := e.claim(1, true)
		if err := e.root(1).Hibernate(ctxT(t), paused.ID); err != nil {
			t.Fatal(err)
		}
		failsWith(t, envdproxy.DialRefused, host(echoPort, paused.ID), "/", withToken(accessToken(paused.Token)))
	})
	t.Run("node unreachable", func(t *testing.T) {
		// A signed file URL needs only the owner's address, so the proxy
		// dials the relay without reading from the node first.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		dead := ln.Addr().String()
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
		e.loc.publish(live.ID, dead)
		failsWith(t, envdproxy.DialNodeUnreachable, host(envdproxy.EnvdPort, live.ID), "/files?path=a.txt&signature=v1_abc")
	})

	if open := sample(t, reg, openStreams, ""); open != 0 {
		t.Errorf("%v relays open after failed dials, want 0", open)
	}
}
