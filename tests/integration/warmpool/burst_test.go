package warmpool_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// burstNames distinct sandboxes are created in one namespace,
// burstConcurrency at a time, alternating between the two replicas; a soak
// run (testbin.SoakScale) makes the burst that many times larger.
// killAfterCreated 201s into the burst the victim is SIGKILLed: about a
// third of the way, so creates are in flight at it and plenty are still to
// come.
var (
	burstNames       = 300 * testbin.SoakScale()
	killAfterCreated = int64(burstNames / 3)
)

const (
	burstConcurrency = 16
	// burstWarm is the pool's warm replicas over the fleet. The simulated
	// nodes clone with no delay (fleet RefillDelay 0), so a claim's VM is
	// replaced in the same step and a pool of any size serves all 300
	// creates from warm; 30 gives each of the 3 nodes 10, enough that the
	// placement (fleet.Order prefers the warmest node) spreads the burst.
	burstWarm = 30
	// deadHolderWindow is the one time the survivor may answer a create
	// 503: from the kill until the dead replica's name reservations can
	// have expired (about 30 s, plus 5 s for a loaded machine). A replica
	// that cannot yet tell whether a dead replica's create claimed a VM
	// may ask the client to retry rather than guess; any other 5xx, or a
	// 503 outside this window, is a failure.
	deadHolderWindow = 35 * time.Second
	// What legitimately stays on the survivor after the burst is idle
	// keep-alive connections to the nodes: sandboxd's transport keeps up
	// to 128 per node for 90 s, longer than this test, and opens one more
	// whenever more claims are in flight to a node than it has idle. So
	// the comparison counts those connections apart (by their sockets'
	// remote ports): the burst may add some, each with one descriptor and
	// two goroutines (its read and write loops), but never more than one
	// per claim in flight at once per node (nodes × burstConcurrency in
	// all); everything else must come back to within goroutineSlack and
	// fdSlack of before. A diagnostic run showed the growth is exactly
	// that: +5 net/http.(*persistConn) write loops, +5 sockets. The
	// slacks cover what is in flight at a reading (a timer, the request
	// that reads the metrics, a connection the test just closed), and
	// still fail a leak of one goroutine or descriptor per 40 of the
	// about 200 creates the survivor serves; a connection leaked per
	// create exceeds the bound on node connections.
	goroutineSlack = 4
	fdSlack        = 2
)

// burstImage names the pool every burst sandbox claims from.
const burstImage = "ubuntu:24.04"

// TestReplicaKilledDuringCreateBurst fires 300 creates of distinct names
// at two replicas and SIGKILLs one of them a third of the way through. A
// client retries every create that failed at the survivor until it is
// created or found, as a client of a two-replica Service would; in the
// end every name is one sandbox, served by the survivor, backed by
// exactly one claimed VM, and the survivor is back to the goroutines and
// file descriptors it had before the burst.
//
// The victim is the replica that does not hold the warm-pool Lease, so
// the survivor's goroutines compare like with like: taking the Lease over
// would legitimately start the driver's loops on it (TestReplicasFailover
// kills the leader).
func TestReplicaKilledDuringCreateBurst(t *testing.T) {
	e := startEnv(t)
	systemNS := e.namespace(t, "sandbox-system")
	ns := e.namespace(t, "burst")
	warmupNS := e.namespace(t, "burst-warmup")
	f := e.startFleet(t, "b-", 3, token)
	pair := startReplicaPair(t, e, systemNS)

	key := keyOf(burstImage)
	e.apply(t, ns, "base", key.Template, burstWarm)
	eventually(t, fmt.Sprintf("%d warm over 3 nodes", burstWarm), func() (bool, string) { return placedAsExpected(key, burstWarm, f) })

	leader, follower := pair.leaderAndFollower(t, e, systemNS)
	victim, survivor := follower, leader
	adminToken := e.c.AdminConfig().BearerToken
	victimAPI := newReplicaAPI(t, victim, adminToken)
	survivorAPI := newReplicaAPI(t, survivor, adminToken)
	t.Logf("victim %s (follower), survivor %s (holds the lease)", victim.name, survivor.name)

	// Both replicas must see the pool before the burst, or its first
	// creates would be refused for capacity, not for the kill.
	createUntilServed(t, victimAPI, warmupNS, "warmup-victim", burstImage)
	createUntilServed(t, survivorAPI, warmupNS, "warmup-survivor", burstImage)
	// A round of burstConcurrency creates at once brings up what serving
	// concurrent creates starts once (connections, per-node clients), so
	// the baseline below compares a warm survivor with a warm survivor.
	warmupConcurrent(t, survivorAPI, warmupNS, burstConcurrency, burstConcurrency)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	ports := nodePorts(t, f)
	before := usage(ctx, t, survivorAPI, survivor, ports)
	// Kept to show, should the survivor not settle, what grew.
	stacksBefore, err := survivorAPI.goroutineStacks(ctx)
	if err != nil {
		t.Fatal(err)
	}
	fdKindsBefore := fdKinds(survivor.Process)

	b := &burst{ns: ns, victim: victimAPI, survivor: survivorAPI, killNow: make(chan struct{})}
	b.triggerKill = sync.OnceFunc(func() { close(b.killNow) })
	names := make(chan int)
	var workers sync.WaitGroup
	for range burstConcurrency {
		workers.Go(func() {
			for i := range names {
				b.run(ctx, i)
			}
		})
	}
	// The kill runs beside the workers: creates keep going to both
	// replicas while the victim dies.
	var createdAtKill int64
	killErr := make(chan error, 1)
	go func() {
		<-b.killNow
		createdAtKill = b.created201.Load()
		b.mu.Lock()
		b.killedAt = time.Now()
		b.mu.Unlock()
		killErr <- victim.Kill()
	}()
	burstStart := time.Now()
	for i := range burstNames {
		names <- i
	}
	close(names)
	workers.Wait()
	burstTook := time.Since(burstStart)
	// Kill now if the burst ended short of killAfterCreated 201s, so the
	// kill goroutine ends; the check below then fails the test.
	b.triggerKill()
	if err := <-killErr; err != nil {
		t.Fatalf("kill %s: %v", victim.name, err)
	}
	if createdAtKill < killAfterCreated {
		t.Fatalf("the burst ended with %d creates answered 201, short of the %d the kill waits for: %s",
			createdAtKill, killAfterCreated, b.summary().failureKinds)
	}
	if err := survivor.ExitErr(); err != nil {
		t.Fatalf("the survivor died: %v", err)
	}
	b.resolveFailed(ctx, t)

	res := b.summary()
	t.Logf("burst: %d creates over %v, %d at once; %s SIGKILLed once %d had answered 201",
		burstNames, burstTook.Round(time.Millisecond), burstConcurrency, victim.name, createdAtKill)
	t.Logf("creates answered 201: %d before the kill (%d by %s, %d by %s), %d after the kill (%d by %s, %d by %s)",
		res.createdBefore, res.createdBy[beforeKill][victim.name], victim.name, res.createdBy[beforeKill][survivor.name], survivor.name,
		res.createdAfter, res.createdBy[afterKill][victim.name], victim.name, res.createdBy[afterKill][survivor.name], survivor.name)
	t.Logf("failed first attempts: %d (%s); retries at the survivor: %d over %d names, answered other than 201: %s; resolved by 409 + GET: %d",
		res.failed, res.failureKinds, res.retries, res.retriedNames, res.retryKinds, res.foundAfterConflict)
	t.Logf("every name resolved %v after the kill", res.resolvedAfterKill.Round(time.Millisecond))

	if len(res.unresolved) > 0 {
		t.Fatalf("%d names never resolved at the survivor: %s", len(res.unresolved), strings.Join(res.unresolved, "; "))
	}
	// A SIGKILLed replica answers nothing rather than 5xx, and the
	// survivor keeps answering throughout.
	for _, a := range res.serverErrors {
		since := a.at.Sub(res.killedAt).Round(time.Millisecond)
		switch {
		case !a.survivor:
			t.Errorf("%s answered %s (%v from the kill)", a.replica, a.what, since)
		case a.code == 0:
			t.Errorf("the survivor gave no answer %v from the kill: %s", since, a.what)
		case a.code != http.StatusServiceUnavailable || since < 0 || since > deadHolderWindow:
			t.Errorf("the survivor answered %s %v from the kill (only a 503 within %v after it is allowed)", a.what, since, deadHolderWindow)
		}
	}

	// The fleet holds one VM per name and nothing else in the namespace:
	// no twin from a retry of a create the dead replica had already
	// claimed, no orphan of a create that answered nothing. Claims are
	// made before a create answers; a late-granted claim the fleet core
	// releases is retried with back-off up to 5 s, so 15 s settles it.
	var claims map[string][]string
	poll.UntilNil(t, "the fleet to hold exactly one VM per name", func() error {
		claims = claimsIn(f, ns)
		if ok, state := fleetMatches(claims, res.createdID, burstNames); !ok {
			return errors.New(state)
		}
		return nil
	})
	total := 0
	for _, ids := range claims {
		total += len(ids)
	}
	t.Logf("fleet: %d claimed VMs for %d names in %s", total, len(claims), ns)

	// Every name that got a 201 is served by the survivor, as the sandbox
	// that create made (same claim id), once its node published it (every
	// 300 ms here).
	pending := slices.Sorted(maps.Keys(res.createdID))
	poll.UntilNil(t, "the survivor to serve every created name as created", func() error {
		// Names served as created are not asked again.
		var still, why []string
		for _, name := range pending {
			rep, err := survivorAPI.get(ctx, ns, name)
			switch {
			case err != nil:
				why = append(why, fmt.Sprintf("%s: %v", name, err))
			case rep.Code != http.StatusOK:
				why = append(why, fmt.Sprintf("%s: %s", name, rep))
			case rep.Object.Annotations[sandbox.AnnotationID] != res.createdID[name]:
				why = append(why, fmt.Sprintf("%s: served claim %q, created %q", name, rep.Object.Annotations[sandbox.AnnotationID], res.createdID[name]))
			default:
				continue
			}
			still = append(still, name)
		}
		pending = still
		if len(still) > 0 {
			return fmt.Errorf("%d not served as created: %s", len(still), firstN(why, 10))
		}
		return nil
	})
	poll.UntilNil(t, fmt.Sprintf("the survivor to list exactly the %d burst names", burstNames), func() error {
		rep, err := survivorAPI.list(ctx, ns)
		if err != nil {
			return err
		}
		if rep.Code != http.StatusOK {
			return errors.New(rep.String())
		}
		got := map[string]int{}
		for _, sb := range rep.Object.Items {
			got[sb.Name]++
		}
		if !sameNames(got, burstNames) {
			return fmt.Errorf("%d items, %d distinct names", len(rep.Object.Items), len(got))
		}
		return nil
	})

	// The survivor returns to its pre-burst goroutines and descriptors,
	// but for idle connections to the nodes, once the burst's requests
	// are done.
	maxNodeConns := len(ports) * burstConcurrency
	var now usageFigures
	back := false
	// Should the wait below fail the test, show what grew: the goroutine
	// profile is read only then, since reading it on every poll would be
	// slow and would itself perturb the figures polled.
	defer func() {
		if back {
			return
		}
		grown := []string{"(goroutine profile unreadable)"}
		if stacksAfter, err := survivorAPI.goroutineStacks(ctx); err == nil {
			grown = grownStacks(stacksBefore, stacksAfter)
		}
		t.Errorf("descriptors by kind %v → %v; grown stacks:\n%s", fdKindsBefore, fdKinds(survivor.Process), strings.Join(grown, "\n"))
	}()
	poll.UntilNil(t, "the survivor to settle back to its goroutines and descriptors before the burst", func() error {
		now = usage(ctx, t, survivorAPI, survivor, ports)
		grown := max(now.nodeConns-before.nodeConns, 0)
		if now.goroutines <= before.goroutines+2*grown+goroutineSlack &&
			now.fds <= before.fds+grown+fdSlack &&
			now.nodeConns <= maxNodeConns {
			return nil
		}
		return fmt.Errorf("goroutines %d → %d, file descriptors %d → %d, node connections %d → %d "+
			"(allowed: 2 goroutines and 1 descriptor per added node connection, plus %d and %d; at most %d node connections)",
			before.goroutines, now.goroutines, before.fds, now.fds, before.nodeConns, now.nodeConns,
			goroutineSlack, fdSlack, maxNodeConns)
	})
	back = true
	t.Logf("survivor goroutines: %d before the burst, %d after; file descriptors: %d before, %d after; of them connections to the nodes: %d before, %d after",
		before.goroutines, now.goroutines, before.fds, now.fds, before.nodeConns, now.nodeConns)
}

// warmupConcurrent creates n sandboxes in ns at a, concurrency at once,
// each until it answers 201: each poll creates, concurrency at once,
// every name not created yet.
func warmupConcurrent(t *testing.T, a *replicaAPI, ns string, n, concurrency int) {
	t.Helper()
	pending := make([]string, n)
	for i := range n {
		pending[i] = fmt.Sprintf("warmup-%02d", i)
	}
	poll.UntilNil(t, fmt.Sprintf("%d warm-up creates in %s to answer 201", n, ns), func() error {
		var (
			wg    sync.WaitGroup
			mu    sync.Mutex
			still []string
			last  error
		)
		slots := make(chan struct{}, concurrency)
		for _, name := range pending {
			wg.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				ctx, cancel := context.WithTimeout(context.Background(), replicaAPITimeout)
				rep, err := a.create(ctx, testSandbox(ns, name, burstImage))
				cancel()
				if err == nil && rep.Code == http.StatusCreated {
					return
				}
				mu.Lock()
				still, last = append(still, name), fmt.Errorf("warm-up create %s/%s: %v %v", ns, name, rep, err)
				mu.Unlock()
			})
		}
		wg.Wait()
		pending = still
		if len(still) > 0 {
			return fmt.Errorf("%d not created yet, e.g. %w", len(still), last)
		}
		return nil
	})
}

// usageFigures are a replica's goroutines, open descriptors, and the
// TCP connections among them to the fleet's nodes.
type usageFigures struct {
	goroutines, fds, nodeConns int
}

// usage reads the replica's figures after closing the test's own idle
// connection to it, so every reading counts the same single connection
// the metrics request opens.
func usage(ctx context.Context, t *testing.T, a *replicaAPI, r *replica, nodePorts map[int]bool) usageFigures {
	t.Helper()
	a.transport.CloseIdleConnections()
	var u usageFigures
	var err error
	if u.fds, err = openFDs(r.Process); err != nil {
		t.Fatal(err)
	}
	if u.nodeConns, err = socketsTo(r.Process, nodePorts); err != nil {
		t.Fatal(err)
	}
	if u.goroutines, err = a.goroutines(ctx); err != nil {
		t.Fatal(err)
	}
	return u
}

// burst is the state of one create burst: who answered what, when.
type burst struct {
	ns               string
	victim, survivor *replicaAPI

	created201 atomic.Int64
	// killNow is closed (once, by triggerKill) when killAfterCreated
	// creates have answered 201.
	killNow     chan struct{}
	triggerKill func()

	mu       sync.Mutex
	killedAt time.Time
	results  []nameResult
	answers  []answer // every create not answered 201, and the survivor's GET 5xx
}

// nameResult is how one name ended.
type nameResult struct {
	name       string
	createdBy  string // the replica whose 201 created it; "" if found after a 409
	createdAt  time.Time
	createdID  string // the claim id the 201 carried
	found      bool   // resolved by 409 AlreadyExists and a GET that found it
	retries    int    // creates at the survivor after the first attempt
	resolved   bool
	resolvedAt time.Time
	last       string // the last answer, for an unresolved name
}

// answer is one create not answered 201, or a survivor GET answered 5xx.
type answer struct {
	at       time.Time
	replica  string
	code     int // 0: no HTTP answer
	what     string
	survivor bool
	first    bool // the name's first attempt
}

func nameOf(i int) string { return fmt.Sprintf("burst-%03d", i) }

// run creates name i at its replica (even at the victim, odd at the
// survivor) and, if that fails, retries at the survivor.
func (b *burst) run(ctx context.Context, i int) {
	name := nameOf(i)
	first := b.survivor
	if i%2 == 0 {
		first = b.victim
	}
	res := nameResult{name: name}
	rep, err := first.create(ctx, testSandbox(b.ns, name, burstImage))
	now := time.Now()
	if err == nil && rep.Code == http.StatusCreated {
		b.createdOK(&res, first, rep.Object, now)
	} else {
		// Retried at the survivor once the burst is over: resolveFailed.
		b.record(first, rep, err, now, true)
	}
	b.mu.Lock()
	b.results = append(b.results, res)
	b.mu.Unlock()
}

// createdOK records res created by a's 201 and triggers the kill once
// killAfterCreated creates of the burst have answered 201.
func (b *burst) createdOK(res *nameResult, a *replicaAPI, sb *agentsv1beta1.Sandbox, at time.Time) {
	res.createdBy, res.createdAt, res.createdID = a.r.name, at, sb.Annotations[sandbox.AnnotationID]
	res.resolved, res.resolvedAt = true, at
	if b.created201.Add(1) == killAfterCreated {
		b.triggerKill()
	}
}

// resolveFailed retries at the survivor, as a client of a two-replica
// Service would, every create whose first attempt failed, until each
// answers 201, or 409 AlreadyExists and a GET then finds the name. A name
// a dead replica held may stay reserved, neither visible nor free, for up
// to the hold TTL (--name-hold-ttl, 20 s in these tests), and nothing
// announces its release: so each poll tries every name still open once,
// burstConcurrency at a time.
func (b *burst) resolveFailed(ctx context.Context, t *testing.T) {
	t.Helper()
	b.mu.Lock()
	var pending []*nameResult
	for i := range b.results {
		if !b.results[i].resolved {
			pending = append(pending, &b.results[i])
		}
	}
	b.mu.Unlock()
	poll.UntilNil(t, fmt.Sprintf("the %d names whose first create failed to resolve at the survivor", len(pending)), func() error {
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		slots := make(chan struct{}, burstConcurrency)
		for _, res := range pending {
			wg.Go(func() {
				slots <- struct{}{}
				defer func() { <-slots }()
				b.resolveOnce(ctx, res)
			})
		}
		wg.Wait()
		var still, why []string
		open := pending[:0]
		for _, res := range pending {
			if !res.resolved {
				open = append(open, res)
				still, why = append(still, res.name), append(why, res.name+": "+res.last)
			}
		}
		pending = open
		if len(still) > 0 {
			return fmt.Errorf("%d unresolved: %s", len(still), firstN(why, 10))
		}
		return nil
	})
}

// resolveOnce tries res's create at the survivor once: resolved on 201,
// or on 409 AlreadyExists and a GET that then finds the name.
func (b *burst) resolveOnce(ctx context.Context, res *nameResult) {
	res.retries++
	rep, err := b.survivor.create(ctx, testSandbox(b.ns, res.name, burstImage))
	now := time.Now()
	if err == nil && rep.Code == http.StatusCreated {
		b.createdOK(res, b.survivor, rep.Object, now)
		return
	}
	b.record(b.survivor, rep, err, now, false)
	res.last = describe(rep, err)
	if err == nil && rep.alreadyExists() {
		got, gerr := b.survivor.get(ctx, b.ns, res.name)
		if gerr == nil && got.Code == http.StatusOK {
			res.found, res.resolved, res.resolvedAt = true, true, time.Now()
			return
		}
		if gerr == nil && got.Code >= 500 {
			b.record(b.survivor, got, nil, time.Now(), false)
		}
		res.last += "; then GET " + describe(got, gerr)
	}
}

// record keeps a failed create attempt.
func (b *burst) record(a *replicaAPI, rep reply[agentsv1beta1.Sandbox], err error, at time.Time, first bool) {
	code := rep.Code
	if err != nil {
		code = 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.answers = append(b.answers, answer{at: at, replica: a.r.name, code: code, what: describe(rep, err), survivor: a == b.survivor, first: first})
}

func describe[T any](rep reply[T], err error) string {
	if err != nil {
		return err.Error()
	}
	return rep.String()
}

// Indexes of burstSummary.createdBy.
const (
	beforeKill = 0
	afterKill  = 1
)

// burstSummary is what the test asserts and logs.
type burstSummary struct {
	killedAt                    time.Time
	createdBefore, createdAfter int
	createdBy                   [2]map[string]int // [beforeKill] and [afterKill], by replica
	createdID                   map[string]string
	failed                      int
	failureKinds, retryKinds    string // counts of answers by replica and status
	retries, retriedNames       int
	foundAfterConflict          int
	resolvedAfterKill           time.Duration
	unresolved                  []string
	serverErrors                []answer // 5xx of either replica, and the survivor's failures to answer
}

func (b *burst) summary() burstSummary {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := burstSummary{killedAt: b.killedAt, createdBy: [2]map[string]int{{}, {}}, createdID: map[string]string{}}
	var last time.Time
	for _, r := range b.results {
		if !r.resolved {
			s.unresolved = append(s.unresolved, r.name+": "+r.last)
			continue
		}
		if r.resolvedAt.After(last) {
			last = r.resolvedAt
		}
		if r.retries > 0 {
			s.retriedNames++
			s.retries += r.retries
		}
		if r.found {
			s.foundAfterConflict++
			continue
		}
		s.createdID[r.name] = r.createdID
		if r.createdAt.Before(b.killedAt) {
			s.createdBefore++
			s.createdBy[beforeKill][r.createdBy]++
		} else {
			s.createdAfter++
			s.createdBy[afterKill][r.createdBy]++
		}
	}
	s.resolvedAfterKill = last.Sub(b.killedAt)
	firstKinds, retryKinds := map[string]int{}, map[string]int{}
	for _, a := range b.answers {
		kind := fmt.Sprintf("%s %d", a.replica, a.code)
		if a.code == 0 {
			kind = a.replica + " no answer"
		}
		if a.first {
			s.failed++
			firstKinds[kind]++
		} else {
			retryKinds[kind]++
		}
		if a.code >= 500 || (a.survivor && a.code == 0) {
			s.serverErrors = append(s.serverErrors, a)
		}
	}
	s.failureKinds, s.retryKinds = countsString(firstKinds), countsString(retryKinds)
	sort.Strings(s.unresolved)
	return s
}

// countsString lists counts by key, sorted, or says "none".
func countsString(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(counts))
	for k, n := range counts {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}

// sameNames reports whether got holds each burst name exactly once and
// nothing else.
func sameNames(got map[string]int, n int) bool {
	if len(got) != n {
		return false
	}
	for i := range n {
		if got[nameOf(i)] != 1 {
			return false
		}
	}
	return true
}

// fleetMatches checks the fleet's claims in the namespace against the n
// burst names: one VM each, none for any other name, and for a name a
// 201 created the VM that create claimed.
func fleetMatches(claims map[string][]string, createdID map[string]string, n int) (bool, string) {
	var twins, missing, strangers, wrong []string
	want := map[string]bool{}
	for i := range n {
		name := nameOf(i)
		want[name] = true
		switch ids := claims[name]; {
		case len(ids) == 0:
			missing = append(missing, name)
		case len(ids) > 1:
			twins = append(twins, fmt.Sprintf("%s ×%d", name, len(ids)))
		case createdID[name] != "" && ids[0] != createdID[name]:
			wrong = append(wrong, fmt.Sprintf("%s holds %s, created %s", name, ids[0], createdID[name]))
		}
	}
	for name, ids := range claims {
		if !want[name] {
			strangers = append(strangers, fmt.Sprintf("%s ×%d", name, len(ids)))
		}
	}
	sort.Strings(twins)
	sort.Strings(strangers)
	if len(twins)+len(missing)+len(strangers)+len(wrong) == 0 {
		return true, ""
	}
	return false, fmt.Sprintf("%d names with more than one VM (%s); %d with none (%s); %d VMs of other names (%s); %d not the created VM (%s)",
		len(twins), firstN(twins, 20), len(missing), firstN(missing, 20), len(strangers), firstN(strangers, 20), len(wrong), firstN(wrong, 20))
}

// firstN joins at most n of items, saying how many were left out.
func firstN(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, ", ")
	}
	return fmt.Sprintf("%s, … %d more", strings.Join(items[:n], ", "), len(items)-n)
}
