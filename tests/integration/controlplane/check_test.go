package controlplane_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// fault is when a part of the control plane was down, as the test saw it,
// and the window in which the load's requests may fail because of it.
type fault struct {
	part  string    // the part that fails, for the report
	what  string    // the fault, for the report
	start time.Time // just before the part was stopped
	ready time.Time // when the part was ready again
	// bound is how long after ready requests may still fail: what the
	// clients of the part need to notice it is back (see the tests'
	// recovery bounds).
	bound time.Duration
}

// windowEnd is the end of the failure window [start, ready+bound].
func (f fault) windowEnd() time.Time { return f.ready.Add(f.bound) }

// inWindow reports whether o was in flight at some moment of the window:
// a request that was under way when the part went down may fail too.
func (f fault) inWindow(o outcome) bool {
	return !o.end.Before(f.start) && !o.start.After(f.windowEnd())
}

// phase is where a request started relative to the fault.
type phase int

const (
	before phase = iota // before the part was stopped
	during              // while it was down
	after               // once it was ready again
	phases
)

func (f fault) phaseOf(o outcome) phase {
	switch {
	case o.start.Before(f.start):
		return before
	case o.start.Before(f.ready):
		return during
	}
	return after
}

// kindFigures are the load's figures for one kind of request.
type kindFigures struct {
	total, failed [phases]int
	// recovered is whether a request that started once the part was ready
	// succeeded; recovery is from ready to the end of the first such.
	recovered bool
	recovery  time.Duration
	// latencies of the successful requests, by phase, for medians.
	latencies [phases][]time.Duration
}

// median is the median latency of the successful requests in phase p, 0
// when there were none.
func (k *kindFigures) median(p phase) time.Duration {
	l := slices.Clone(k.latencies[p])
	if len(l) == 0 {
		return 0
	}
	slices.Sort(l)
	return l[len(l)/2]
}

// figures sums the outcomes by kind and phase and finds each kind's
// recovery.
func (f fault) figures(outcomes []outcome) map[kind]*kindFigures {
	out := map[kind]*kindFigures{}
	for _, k := range kinds {
		out[k] = &kindFigures{}
	}
	for _, o := range outcomes {
		k := out[o.kind]
		p := f.phaseOf(o)
		k.total[p]++
		if !o.ok() {
			k.failed[p]++
			continue
		}
		k.latencies[p] = append(k.latencies[p], o.end.Sub(o.start))
		if p == after && (!k.recovered || o.end.Sub(f.ready) < k.recovery) {
			k.recovered, k.recovery = true, o.end.Sub(f.ready)
		}
	}
	return out
}

// checkLoad logs the figures a report needs and asserts: the load ran
// before the fault (otherwise nothing is compared), no request failed
// outside the window, and each kind of request succeeded again within
// the bound after the part was ready.
func (f fault) checkLoad(t *testing.T, outcomes []outcome) map[kind]*kindFigures {
	t.Helper()
	figs := f.figures(outcomes)
	t.Logf("fault: %s; down %v (stopped to ready); failure window %v (to ready + %v recovery bound)",
		f.what, f.ready.Sub(f.start).Round(time.Millisecond), f.windowEnd().Sub(f.start).Round(time.Millisecond), f.bound)
	t.Logf("%-7s %18s %18s %18s %24s  %s", "kind", "before ok/failed", "during ok/failed", "after ok/failed", "median ok before/after", "recovery after ready (after fault)")
	for _, k := range kinds {
		fg := figs[k]
		cells := make([]string, phases)
		for p := range phases {
			cells[p] = fmt.Sprintf("%d/%d", fg.total[p]-fg.failed[p], fg.failed[p])
		}
		rec := "never"
		if fg.recovered {
			rec = fmt.Sprintf("%v (%v)", fg.recovery.Round(time.Millisecond), f.ready.Add(fg.recovery).Sub(f.start).Round(time.Millisecond))
		}
		medians := fmt.Sprintf("%v/%v", fg.median(before).Round(time.Millisecond), fg.median(after).Round(time.Millisecond))
		t.Logf("%-7s %18s %18s %18s %24s  %s", k, cells[before], cells[during], cells[after], medians, rec)
	}

	for _, k := range kinds {
		if ok := figs[k].total[before] - figs[k].failed[before]; ok == 0 {
			t.Fatalf("no %s succeeded before the fault: the load did not run, nothing to compare", k)
		}
	}
	var outside []string
	for _, o := range outcomes {
		if !o.ok() && !f.inWindow(o) {
			outside = append(outside, fmt.Sprintf("%s %s at %+v..%+v of the fault: %s", o.kind, o.name,
				o.start.Sub(f.start).Round(time.Millisecond), o.end.Sub(f.start).Round(time.Millisecond), o.err))
		}
	}
	if len(outside) > 0 {
		t.Errorf("%d requests failed outside the window [0, %v] of the fault, e.g.:\n%s",
			len(outside), f.windowEnd().Sub(f.start).Round(time.Millisecond), strings.Join(outside[:min(len(outside), 10)], "\n"))
	}
	for _, k := range kinds {
		switch fg := figs[k]; {
		case !fg.recovered:
			t.Errorf("no %s succeeded after the part was ready again (%d tried, %d failed)", k, fg.total[after], fg.failed[after])
		case fg.recovery > f.bound:
			t.Errorf("the first %s to succeed after the part was ready ended %v after it, past the %v bound", k, fg.recovery.Round(time.Millisecond), f.bound)
		}
	}
	return figs
}

// logOutage logs how the requests of kind k that were in flight at some
// moment while the part was down (started during the outage, or before it
// and still running) fared: how many, how many started during it, how
// many succeeded and the slowest of those, how many failed and how.
func (f fault) logOutage(t *testing.T, outcomes []outcome, k kind) {
	t.Helper()
	var inFlight, startedDuring, ok, failed int
	var slowest time.Duration
	var example string
	for _, o := range outcomes {
		if o.kind != k || o.end.Before(f.start) || !o.start.Before(f.ready) {
			continue
		}
		inFlight++
		if f.phaseOf(o) == during {
			startedDuring++
		}
		if o.ok() {
			ok++
			slowest = max(slowest, o.end.Sub(o.start))
			continue
		}
		if failed == 0 {
			example = o.err
		}
		failed++
	}
	verdict := "kept working"
	switch {
	case inFlight == 0:
		verdict = "none made (their worker was held up by another request)"
	case failed > 0:
		verdict = "failed"
	case startedDuring == 0 || slowest > f.ready.Sub(f.start)/2:
		verdict = "stalled until the part was back, then succeeded"
	}
	t.Logf("%ss while %s was down: %s; %d in flight (%d started during the outage), %d succeeded (slowest %v), %d failed %s",
		k, f.part, verdict, inFlight, startedDuring, ok, slowest.Round(time.Millisecond), failed, example)
}

// sandboxFate is what the load did with one sandbox name.
type sandboxFate struct {
	created       bool // a create answered 201
	createFailed  bool // a create answered otherwise or not at all
	deleteTried   bool
	deleted       bool // a delete answered 200
	createStarted time.Time
}

func fates(outcomes []outcome) map[string]*sandboxFate {
	out := map[string]*sandboxFate{}
	for _, o := range outcomes {
		if o.name == "" {
			continue
		}
		fate := out[o.name]
		if fate == nil {
			fate = &sandboxFate{}
			out[o.name] = fate
		}
		switch o.kind {
		case kindCreate:
			fate.created, fate.createFailed, fate.createStarted = o.ok(), !o.ok(), o.start
		case kindDelete:
			fate.deleteTried, fate.deleted = true, o.ok()
		}
	}
	return out
}

// checkState checks what the server and the fleet hold once the load has
// stopped: every sandbox whose create answered 201 and that the load did
// not try to delete answers GET, every one whose delete answered 200 is
// gone, and the fleet's claims in the namespace and the server's list of
// it name the same sandboxes, so no claim is invisible. A create whose
// answer was lost may still have claimed; it must then be listed, and is
// counted.
func (e *testEnv) checkState(ctx context.Context, t *testing.T, api sandboxAPI, f fault, outcomes []outcome) {
	t.Helper()
	fate := fates(outcomes)
	var kept, gone int
	var getErrs []string
	for _, name := range sortedKeys(fate) {
		s := fate[name]
		switch {
		case s.created && !s.deleteTried:
			kept++
			if _, err := api.get(ctx, name); err != nil {
				getErrs = append(getErrs, err.Error())
			}
		case s.deleted:
			gone++
			if code, err := api.get(ctx, name); code != http.StatusNotFound {
				getErrs = append(getErrs, fmt.Sprintf("deleted sandbox %s: GET answered %d (%v), want 404", name, code, err))
			}
		}
	}
	if len(getErrs) > 0 {
		t.Errorf("%d of %d sandboxes that should stand and %d that were deleted answer GET wrongly, e.g.:\n%s",
			len(getErrs), kept, gone, strings.Join(getErrs[:min(len(getErrs), 10)], "\n"))
	}

	// The list and the claims converge once every node has published
	// after the last request; poll until they agree.
	var listed, claimed []string
	err := wait.PollUntilContextTimeout(ctx, pollEvery, waitTimeout, true, func(context.Context) (bool, error) {
		var o outcome
		listed, o = api.list()
		if !o.ok() {
			return false, nil
		}
		claimed = e.claimedIn(api.namespace)
		return slices.Equal(listed, claimed), nil
	})
	if err != nil {
		t.Errorf("the server's list and the fleet's claims in %s never agreed:\nclaimed, not listed: %v\nlisted, not claimed: %v",
			api.namespace, missingFrom(claimed, listed), missingFrom(listed, claimed))
	}

	var lostButClaimed, strangers []string
	for _, name := range claimed {
		s, ok := fate[name]
		switch {
		case !ok:
			strangers = append(strangers, name)
		case s.createFailed:
			lostButClaimed = append(lostButClaimed, fmt.Sprintf("%s (create started %+v of the fault)", name, s.createStarted.Sub(f.start).Round(time.Millisecond)))
		}
	}
	if len(strangers) > 0 {
		t.Errorf("the fleet holds claims in %s the load never asked for: %v", api.namespace, strangers)
	}
	t.Logf("after recovery: %d sandboxes answered 201 and stand (all GET 200 unless reported), %d deleted (GET 404), %d listed = claimed; %d creates without a 201 claimed anyway and are listed: %v",
		kept, gone, len(claimed), len(lostButClaimed), lostButClaimed)
}

// checkInformerResumed checks that the server's NodeInventory informer
// follows the cluster again: a claim made on a node directly, behind the
// server's back, reaches the server only through the node's next
// NodeInventory publish and the informer's watch, so its appearing in the
// list says the informer resumed. The server's memory of its own writes
// cannot stand in for it here, as it would for a create through the API.
func (e *testEnv) checkInformerResumed(ctx context.Context, t *testing.T, api sandboxAPI, name string) {
	t.Helper()
	n := e.fleet.Node(0)
	client, err := sandboxd.New(n.Addr(), sandboxd.WithToken(e.rootToken))
	if err != nil {
		t.Fatalf("sandboxd client for %s: %v", n.Name(), err)
	}
	claimed := time.Now()
	claim, err := client.Claim(ctx, sandboxd.ClaimRequest{Template: templateBase, ClaimRef: api.namespace + "/" + name, NoRedirect: true})
	if err != nil {
		t.Fatalf("claim %s on %s directly: %v", name, n.Name(), err)
	}
	poll.UntilNil(t, fmt.Sprintf("a claim made on %s after recovery to appear in the server's list (else its NodeInventory informer did not resume)", n.Name()), func() error {
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		names, o := api.list()
		if !o.ok() {
			return errors.New("list: " + o.err)
		}
		if !slices.Contains(names, name) {
			return fmt.Errorf("listed %v", names)
		}
		return nil
	})
	t.Logf("a NodeInventory change after recovery (a claim on %s behind the server) was listed %v after the claim", n.Name(), time.Since(claimed).Round(time.Millisecond))
	if o := api.delete(name); !o.ok() {
		t.Fatalf("delete %s, known to the server only from inventory: %s", name, o.err)
	}
	if e.nodeHolds(0, claim.ID) {
		t.Errorf("%s still holds %s after the server answered its delete", n.Name(), claim.ID)
	}
}

// drain deletes every sandbox listed in the namespace until the list is
// empty and no node holds a claim in it, or ctx ends.
func (e *testEnv) drain(ctx context.Context, api sandboxAPI) error {
	last := "not tried"
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(context.Context) (bool, error) {
		names, o := api.list()
		if !o.ok() {
			last = "list: " + o.err
			return false, nil
		}
		for _, name := range names {
			if d := api.delete(name); !d.ok() && d.code != http.StatusNotFound {
				last = fmt.Sprintf("delete %s: %s", name, d.err)
			}
		}
		claims := e.claimedIn(api.namespace)
		if len(names) > 0 || len(claims) > 0 {
			last = fmt.Sprintf("%d listed, %d claimed", len(names), len(claims))
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("drain %s (%s): %w", api.namespace, last, err)
	}
	return nil
}

// claimedIn is the names of the fleet's live claims in namespace, sorted.
func (e *testEnv) claimedIn(namespace string) []string {
	var out []string
	for _, n := range e.fleet.Nodes() {
		for _, en := range n.Snapshot().Entries {
			if ns, name, ok := strings.Cut(en.ClaimRef, "/"); ok && ns == namespace {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// checkNothingClaimed fails the test when any node of the fleet holds a
// claim: the test has deleted its sandboxes, and nothing else claims from
// this fleet.
func (e *testEnv) checkNothingClaimed(t *testing.T) {
	t.Helper()
	var left []string
	for _, n := range e.fleet.Nodes() {
		for _, en := range n.Snapshot().Entries {
			left = append(left, fmt.Sprintf("%s on %s (claim_ref %q)", en.ID, n.Name(), en.ClaimRef))
		}
	}
	if len(left) > 0 {
		t.Errorf("the fleet holds %d claims after the test deleted its sandboxes: %v", len(left), left)
	}
}

// nodeHolds reports whether node i holds the claim with id.
func (e *testEnv) nodeHolds(i int, id string) bool {
	for _, en := range e.fleet.Node(i).Snapshot().Entries {
		if en.ID == id {
			return true
		}
	}
	return false
}

// api returns the admin's request maker for sandboxes in namespace,
// creating the namespace, and registers a cleanup that deletes whatever
// the test leaves there, so a failed test leaves no claim for the next.
func (e *testEnv) api(ctx context.Context, t *testing.T, namespace string) sandboxAPI {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}
	if _, err := e.cluster.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("create namespace %s: %v", namespace, err)
	}
	api := sandboxAPI{raw: e.cluster.Clientset().Discovery().RESTClient(), namespace: namespace}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
		defer cancel()
		if err := e.drain(ctx, api); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return api
}

// waitAnswering waits until a create, a list showing it and a delete all
// succeed through the aggregator: the environment serves, whatever an
// earlier test did to it, and the connections the load will use are open
// before any figure is taken.
func (e *testEnv) waitAnswering(ctx context.Context, t *testing.T, api sandboxAPI, name string) {
	t.Helper()
	poll.UntilNil(t, "the environment to answer a create, a list and a delete", func() error {
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		if o := api.create(name); !o.ok() && o.code != http.StatusConflict {
			return errors.New("create: " + o.err)
		}
		names, o := api.list()
		if !o.ok() || !slices.Contains(names, name) {
			return fmt.Errorf("list: %s %v", o.err, names)
		}
		if o := api.delete(name); !o.ok() {
			return errors.New("delete: " + o.err)
		}
		return nil
	})
}

// serverGoroutines reads go_goroutines from sandbox-apiserver's /metrics.
// The aggregator proxies only the API group, so the metrics are read from
// the server's own port, at its Service's ClusterIP, verified against the
// caBundle the APIService holds and authenticated with the admin's token,
// which the server checks with the cluster by delegation.
func (e *testEnv) serverGoroutines(ctx context.Context) (int, error) {
	svc, err := e.cluster.Clientset().CoreV1().Services(apiserverenv.Namespace).Get(ctx, apiserverenv.ServiceName, metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get the server's Service: %w", err)
	}
	agg, err := aggregatorclient.NewForConfig(e.cluster.AdminConfig())
	if err != nil {
		return 0, fmt.Errorf("aggregator client: %w", err)
	}
	apiSvc, err := agg.ApiregistrationV1().APIServices().Get(ctx, cluster.APIServiceName(apiserverenv.Group, apiserverenv.Version), metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("get the server's APIService: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(apiSvc.Spec.CABundle) {
		return 0, errors.New("the APIService's caBundle holds no certificate")
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs:    pool,
		ServerName: apiserverenv.ServiceName + "." + apiserverenv.Namespace + ".svc",
		MinVersion: tls.VersionTLS12,
	}}
	defer transport.CloseIdleConnections()
	hc := &http.Client{Transport: transport, Timeout: requestTimeout}
	url := "https://" + net.JoinHostPort(svc.Spec.ClusterIP, strconv.Itoa(int(svc.Spec.Ports[0].Port))) + "/metrics"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+e.cluster.AdminConfig().BearerToken)
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	n, err := testbin.Goroutines(resp.Body)
	if err != nil {
		return 0, fmt.Errorf("GET %s: %w", url, err)
	}
	return n, nil
}

// goroutineSlack is how many goroutines more than before the load the
// server may run once the load has settled. What may legitimately remain
// is connections: idle keep-alive connections to the fleet's nodes (two
// goroutines each, a few per node for concurrent creates) and the
// aggregator's HTTP/2 connections, which a restarted kube-apiserver opens
// anew (a few goroutines each); runs on a two-core machine ended 0 to 8
// above the baseline of about 130. A leak per request would not hide in
// it: the load makes several hundred requests, so one goroutine leaked
// per twenty of them already exceeds the slack.
const goroutineSlack = 25

// checkGoroutinesSettle waits until the server runs no more than
// goroutineSlack goroutines above baseline, and fails the test when it
// never does within waitTimeout.
func (e *testEnv) checkGoroutinesSettle(ctx context.Context, t *testing.T, baseline int) {
	t.Helper()
	began := time.Now()
	last := -1 // the last count read
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, waitTimeout, true, func(ctx context.Context) (bool, error) {
		n, err := e.serverGoroutines(ctx)
		if lastErr = err; err != nil {
			return false, nil
		}
		last = n
		return last <= baseline+goroutineSlack, nil
	})
	if err != nil {
		t.Errorf("sandbox-apiserver still ran %d goroutines %v after the load (last read error: %v), %d before it: more than the %d slack",
			last, time.Since(began).Round(time.Second), lastErr, baseline, goroutineSlack)
		return
	}
	t.Logf("sandbox-apiserver goroutines: %d before the load, %d once settled (%v after it; slack %d)",
		baseline, last, time.Since(began).Round(time.Millisecond), goroutineSlack)
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// missingFrom is the elements of a (sorted) not in b (sorted).
func missingFrom(a, b []string) []string {
	var out []string
	for _, s := range a {
		if _, found := slices.BinarySearch(b, s); !found {
			out = append(out, s)
		}
	}
	return out
}
