package publisher_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/src/testing/syncbuf"
)

// waitTimeout bounds every wait for something the publisher does
// asynchronously; generous so a loaded machine does not fail the tests.
const waitTimeout = 30 * time.Second

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)

// request is one call the fake apiserver received.
type request struct {
	Method      string
	Path        string
	Query       url.Values
	ContentType string
	Body        []byte
}

// fakeAPIServer stands in for the kube-apiserver's REST endpoint on
// loopback. It answers applies by echoing the object, as the apiserver echoes
// the stored result, and fails the first failFirst requests with a 500.
type fakeAPIServer struct {
	*httptest.Server
	requests  chan request
	failFirst atomic.Int32
}

func newFakeAPIServer(t *testing.T) *fakeAPIServer {
	t.Helper()
	s := &fakeAPIServer{requests: make(chan request, 64)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *fakeAPIServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.requests <- request{
		Method:      r.Method,
		Path:        r.URL.Path,
		Query:       r.URL.Query(),
		ContentType: r.Header.Get("Content-Type"),
		Body:        body,
	}
	w.Header().Set("Content-Type", "application/json")
	if s.failFirst.Add(-1) >= 0 {
		w.WriteHeader(http.StatusInternalServerError)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"storage unavailable","code":500}`)
		return
	}
	if r.Method == http.MethodDelete {
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Success","code":200}`)
		return
	}
	_, _ = w.Write(body)
}

// next returns the next request the server received, failing the test if
// none arrives in time.
func (s *fakeAPIServer) next(t *testing.T) request {
	t.Helper()
	select {
	case r := <-s.requests:
		return r
	case <-time.After(waitTimeout):
		t.Fatal("no request reached the fake apiserver")
		return request{}
	}
}

func (s *fakeAPIServer) client(t *testing.T) dynamic.Interface {
	t.Helper()
	c, err := dynamic.NewForConfig(&rest.Config{Host: s.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recordingClock is a fake clock that also reports each ticker interval the
// publisher asks for.
type recordingClock struct {
	*clocktesting.FakeClock
	intervals chan time.Duration
}

func newRecordingClock() *recordingClock {
	return &recordingClock{FakeClock: clocktesting.NewFakeClock(t0), intervals: make(chan time.Duration, 8)}
}

func (c *recordingClock) NewTicker(d time.Duration) clock.Ticker {
	c.intervals <- d
	return c.FakeClock.NewTicker(d)
}

// waitForTicker blocks until the publisher's ticker is registered, so a
// clock step is sure to reach it.
func (c *recordingClock) waitForTicker(t *testing.T) {
	t.Helper()
	poll.Until(t, "the publisher's ticker", c.HasWaiters)
}

func sampleInventory() *v1beta1.NodeInventory {
	deadline := metav1.NewTime(t0.Add(time.Hour))
	return &v1beta1.NodeInventory{
		ObjectMeta: metav1.ObjectMeta{
			Name:            "ignored-the-name-is-the-node",
			Labels:          map[string]string{"sandbox.cocoonstack.io/simulated": "true"},
			ResourceVersion: "42",
		},
		Node:    "node-a",
		Address: "127.0.0.1:7777",
		Pools:   []v1beta1.PoolCapacity{{Template: "python", Net: "none", Size: "small", Warm: 2, Target: 3}},
		Entries: []v1beta1.InventoryEntry{
			{Name: "team-b/agent", Phase: v1beta1.SandboxPhaseHibernated, ID: "sb_2", ClaimRef: "team-b/agent", Template: "python"},
			{Name: "sb_1", Phase: v1beta1.SandboxPhaseRunning, ID: "sb_1", Template: "python", Deadline: &deadline},
		},
	}
}

func staticSource(inv *v1beta1.NodeInventory) publisher.Source {
	return func(context.Context) (*v1beta1.NodeInventory, error) { return inv.DeepCopy(), nil }
}

func decodeApplied(t *testing.T, r request) (*v1beta1.NodeInventory, map[string]any) {
	t.Helper()
	var inv v1beta1.NodeInventory
	if err := json.Unmarshal(r.Body, &inv); err != nil {
		t.Fatalf("apply body is not a NodeInventory: %v\n%s", err, r.Body)
	}
	var generic map[string]any
	if err := json.Unmarshal(r.Body, &generic); err != nil {
		t.Fatal(err)
	}
	return &inv, generic
}

func publishedAt(t *testing.T, r request) time.Time {
	t.Helper()
	inv, _ := decodeApplied(t, r)
	if inv.PublishedAt == nil {
		t.Fatalf("apply body has no publishedAt: %s", r.Body)
	}
	return inv.PublishedAt.UTC()
}

func TestPublishOnceAppliesWholeInventory(t *testing.T) {
	srv := newFakeAPIServer(t)
	clk := newRecordingClock()
	p, err := publisher.New(publisher.Config{Client: srv.client(t), Source: staticSource(sampleInventory()), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.PublishOnce(t.Context()); err != nil {
		t.Fatalf("PublishOnce: %v", err)
	}

	r := srv.next(t)
	if r.Method != http.MethodPatch || r.Path != "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/node-a" {
		t.Errorf("request = %s %s, want PATCH /apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/node-a", r.Method, r.Path)
	}
	if got := r.Query.Get("fieldManager"); got != publisher.DefaultFieldManager {
		t.Errorf("fieldManager = %q, want %q", got, publisher.DefaultFieldManager)
	}
	if got := r.Query.Get("force"); got != "true" {
		t.Errorf("force = %q, want true", got)
	}
	if r.ContentType != "application/apply-patch+yaml" {
		t.Errorf("Content-Type = %q, want application/apply-patch+yaml", r.ContentType)
	}

	inv, generic := decodeApplied(t, r)
	if inv.APIVersion != "sandbox.cocoonstack.io/v1beta1" || inv.Kind != "NodeInventory" {
		t.Errorf("type = %s %s", inv.APIVersion, inv.Kind)
	}
	if inv.Name != "node-a" || inv.Node != "node-a" || inv.Address != "127.0.0.1:7777" {
		t.Errorf("name/node/address = %q/%q/%q", inv.Name, inv.Node, inv.Address)
	}
	if inv.Labels["sandbox.cocoonstack.io/simulated"] != "true" {
		t.Errorf("labels from the source were dropped: %v", inv.Labels)
	}
	metadata := generic["metadata"].(map[string]any)
	for _, key := range []string{"creationTimestamp", "resourceVersion"} {
		if _, ok := metadata[key]; ok {
			t.Errorf("apply body sets metadata.%s, which belongs to the apiserver: %s", key, r.Body)
		}
	}
	if inv.PublishedAt == nil || !inv.PublishedAt.Time.Equal(t0) {
		t.Errorf("publishedAt = %v, want the clock's now %v", inv.PublishedAt, t0)
	}
	wantPools := sampleInventory().Pools
	if !slices.Equal(inv.Pools, wantPools) {
		t.Errorf("pools = %+v, want %+v", inv.Pools, wantPools)
	}
	var names []string
	for _, e := range inv.Entries {
		names = append(names, e.Name)
	}
	if !slices.Equal(names, []string{"sb_1", "team-b/agent"}) {
		t.Errorf("entries = %v, want both, sorted by name", names)
	}
	if e := inv.Entries[0]; e.Phase != v1beta1.SandboxPhaseRunning || e.Deadline == nil || !e.Deadline.Time.Equal(t0.Add(time.Hour)) {
		t.Errorf("entry sb_1 = %+v", e)
	}
	if e := inv.Entries[1]; e.Phase != v1beta1.SandboxPhaseHibernated || e.ClaimRef != "team-b/agent" {
		t.Errorf("entry team-b/agent = %+v", e)
	}
}

func TestPublishOnceHonoursFieldManager(t *testing.T) {
	srv := newFakeAPIServer(t)
	p, err := publisher.New(publisher.Config{Client: srv.client(t), Source: staticSource(sampleInventory()), FieldManager: "node-agent"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.PublishOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := srv.next(t).Query.Get("fieldManager"); got != "node-agent" {
		t.Errorf("fieldManager = %q, want node-agent", got)
	}
}

func TestPublishOnceReportsFailures(t *testing.T) {
	srv := newFakeAPIServer(t)
	client := srv.client(t)
	errSource := errors.New("sandboxd unreachable")

	cases := []struct {
		name      string
		source    publisher.Source
		failFirst int32
		wantErr   string
		wantCall  bool
	}{
		{
			name:    "source error",
			source:  func(context.Context) (*v1beta1.NodeInventory, error) { return nil, errSource },
			wantErr: "sandboxd unreachable",
		},
		{
			name:    "no node name",
			source:  staticSource(&v1beta1.NodeInventory{Address: "127.0.0.1:1"}),
			wantErr: "no node name",
		},
		{
			name:      "apiserver error",
			source:    staticSource(sampleInventory()),
			failFirst: 1,
			wantErr:   `apply node "node-a" inventory`,
			wantCall:  true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv.failFirst.Store(tc.failFirst)
			p, err := publisher.New(publisher.Config{Client: client, Source: tc.source})
			if err != nil {
				t.Fatal(err)
			}
			err = p.PublishOnce(t.Context())
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("PublishOnce error = %v, want one containing %q", err, tc.wantErr)
			}
			if tc.wantCall {
				srv.next(t)
			}
			select {
			case r := <-srv.requests:
				t.Errorf("unexpected request %s %s", r.Method, r.Path)
			default:
			}
		})
	}
	if !errors.Is(func() error {
		p, _ := publisher.New(publisher.Config{Client: client, Source: cases[0].source})
		return p.PublishOnce(t.Context())
	}(), errSource) {
		t.Error("a source error is not wrapped")
	}
}

// runPublisher starts p.Run and returns a stop function that cancels it and
// waits for Run to return.
func runPublisher(t *testing.T, p *publisher.Publisher) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run returned %v after cancellation, want nil", err)
				}
			case <-time.After(waitTimeout):
				t.Error("Run did not return after its context was cancelled")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func TestRunPublishesOncePerInterval(t *testing.T) {
	const interval = 10 * time.Second
	srv := newFakeAPIServer(t)
	clk := newRecordingClock()
	p, err := publisher.New(publisher.Config{Client: srv.client(t), Source: staticSource(sampleInventory()), Interval: interval, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	stop := runPublisher(t, p)

	if got := <-clk.intervals; got != interval {
		t.Fatalf("ticker interval = %v, want %v", got, interval)
	}
	if got := publishedAt(t, srv.next(t)); !got.Equal(t0) {
		t.Fatalf("first publish stamped %v, want %v (immediately at start)", got, t0)
	}
	clk.waitForTicker(t)

	// Half an interval must not publish. Were it to, that publish would
	// carry the half-way stamp and be the next one received below.
	clk.Step(interval / 2)
	clk.Step(interval / 2)
	if got := publishedAt(t, srv.next(t)); !got.Equal(t0.Add(interval)) {
		t.Fatalf("second publish stamped %v, want %v (one interval later)", got, t0.Add(interval))
	}
	clk.Step(interval)
	if got := publishedAt(t, srv.next(t)); !got.Equal(t0.Add(2 * interval)) {
		t.Fatalf("third publish stamped %v, want %v", got, t0.Add(2*interval))
	}

	stop()
	select {
	case r := <-srv.requests:
		t.Errorf("request %s %s after Run returned", r.Method, r.Path)
	default:
	}
}

func TestRunDefaultsToThirtySeconds(t *testing.T) {
	srv := newFakeAPIServer(t)
	clk := newRecordingClock()
	p, err := publisher.New(publisher.Config{Client: srv.client(t), Source: staticSource(sampleInventory()), Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	runPublisher(t, p)
	if got := <-clk.intervals; got != 30*time.Second {
		t.Errorf("default ticker interval = %v, want 30s", got)
	}
	srv.next(t)
}

func TestRunKeepsPublishingAfterFailures(t *testing.T) {
	const interval = time.Second
	srv := newFakeAPIServer(t)
	srv.failFirst.Store(2)
	clk := newRecordingClock()
	var sourceCalls atomic.Int32
	source := func(ctx context.Context) (*v1beta1.NodeInventory, error) {
		// The second attempt fails before reaching the apiserver.
		if sourceCalls.Add(1) == 2 {
			return nil, errors.New("sandboxd unreachable")
		}
		return sampleInventory(), nil
	}
	logs := &syncbuf.Buffer{}
	p, err := publisher.New(publisher.Config{Client: srv.client(t), Source: source, Interval: interval, Clock: clk,
		Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	stop := runPublisher(t, p)

	srv.next(t) // first attempt: the apiserver answers 500
	clk.waitForTicker(t)
	clk.Step(interval) // second attempt: the source fails, nothing is sent
	// The fake ticker holds one pending tick; wait until the second attempt
	// has taken it, or the next step's tick would be dropped.
	poll.Until(t, "the second publish attempt", func() bool { return sourceCalls.Load() == 2 })
	clk.Step(interval) // third attempt: the apiserver answers 500 again
	srv.next(t)
	clk.Step(interval) // fourth attempt succeeds
	if got := publishedAt(t, srv.next(t)); !got.Equal(t0.Add(3 * interval)) {
		t.Errorf("publish after failures stamped %v, want %v", got, t0.Add(3*interval))
	}
	if got := sourceCalls.Load(); got != 4 {
		t.Errorf("source called %d times, want 4 (one per tick)", got)
	}
	stop()
	if got := strings.Count(logs.String(), "NodeInventory publish failed"); got != 3 || !strings.Contains(logs.String(), "sandboxd unreachable") {
		t.Errorf("the injected logger got %d failures, want 3: %q", got, logs.String())
	}
}

func TestDeleteRemovesLastPublished(t *testing.T) {
	srv := newFakeAPIServer(t)
	p, err := publisher.New(publisher.Config{Client: srv.client(t), Source: staticSource(sampleInventory())})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Delete(t.Context()); err != nil {
		t.Fatalf("Delete before any publish: %v", err)
	}
	if err := p.PublishOnce(t.Context()); err != nil {
		t.Fatal(err)
	}
	srv.next(t)
	if err := p.Delete(t.Context()); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	r := srv.next(t)
	if r.Method != http.MethodDelete || r.Path != "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/node-a" {
		t.Errorf("request = %s %s, want DELETE of node-a's inventory", r.Method, r.Path)
	}
}

func TestNewRejectsIncompleteConfig(t *testing.T) {
	srv := newFakeAPIServer(t)
	source := staticSource(sampleInventory())
	for name, cfg := range map[string]publisher.Config{
		"no client":         {Source: source},
		"no source":         {Client: srv.client(t)},
		"negative interval": {Client: srv.client(t), Source: source, Interval: -time.Second},
	} {
		if _, err := publisher.New(cfg); err == nil {
			t.Errorf("%s: New accepted the config", name)
		}
	}
}
