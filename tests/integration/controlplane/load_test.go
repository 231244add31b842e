package controlplane_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
)

// requestTimeout bounds one request of the load. Requests during a fault
// either fail at once (connection refused) or hang on whatever is down; a
// bound keeps a hung one from stalling its worker for the kube-apiserver's
// own 60 s. It is longer than the bounds the server puts on its own calls
// (10 s for a name hold's ConfigMap write), so that the client sees the
// server's answer (a 503, say) rather than its own timeout, and a slow
// but working request on a loaded machine is never cut short.
const requestTimeout = 20 * time.Second

// The load: creators workers each create a sandbox, wait createPauseMin
// to createPauseMax, and after every second create delete their oldest
// sandbox still standing, so the fleet's claims grow at half the create
// rate; one lister lists the namespace back to back but for listPause.
// Without that breath the lister alone keeps a core of a two-core machine
// busy (some 300 lists a second) and the creates crawl; with it, it still
// lists every few tens of milliseconds, fine enough to time a recovery.
const (
	creators       = 2
	createPauseMin = 100 * time.Millisecond
	createPauseMax = 200 * time.Millisecond
	listPause      = 20 * time.Millisecond
)

// kind is a kind of request the load makes.
type kind string

const (
	kindCreate kind = "create"
	kindDelete kind = "delete"
	kindList   kind = "list"
)

// kinds is every kind, in the order reports show them.
var kinds = []kind{kindCreate, kindDelete, kindList}

// outcome is one request the load made, as the client saw it.
type outcome struct {
	kind  kind
	name  string // the sandbox created or deleted; empty for a list
	start time.Time
	end   time.Time
	code  int    // HTTP status; 0 when no answer came
	err   string // empty on success
}

func (o outcome) ok() bool { return o.err == "" }

// sandboxAPI makes requests for sandboxes in one namespace through the
// kube-apiserver (the aggregated path) as the admin, never retrying: a
// fault test must see every failure, and client-go would otherwise retry
// some GETs on a reset connection behind the caller's back.
type sandboxAPI struct {
	raw       rest.Interface
	namespace string
}

// collectionPath is the namespace's sandboxes, as the aggregator routes
// them.
func (a sandboxAPI) collectionPath() string {
	return fmt.Sprintf("/apis/%s/%s/namespaces/%s/sandboxes", apiserverenv.Group, apiserverenv.Version, a.namespace)
}

// newSandboxBody is a Sandbox from templateBase's pool as a client would
// send it.
func (a sandboxAPI) newSandboxBody(name string) ([]byte, error) {
	sb := agentsv1beta1.Sandbox{
		TypeMeta: metav1.TypeMeta{APIVersion: agentsv1beta1.GroupVersion.String(), Kind: "Sandbox"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace:   a.namespace,
			Name:        name,
			Annotations: map[string]string{sandbox.AnnotationTemplate: templateBase},
		},
	}
	return json.Marshal(sb)
}

// create POSTs a sandbox named name; success is 201.
func (a sandboxAPI) create(name string) outcome {
	o := outcome{kind: kindCreate, name: name, start: time.Now()}
	body, err := a.newSandboxBody(name)
	if err != nil {
		o.end, o.err = time.Now(), fmt.Sprintf("encode: %v", err)
		return o
	}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	res := a.raw.Post().AbsPath(a.collectionPath()).
		SetHeader("Content-Type", "application/json").Body(body).
		MaxRetries(0).Do(ctx).StatusCode(&o.code)
	o.end = time.Now()
	o.err = resultError(res.Error(), o.code, http.StatusCreated)
	return o
}

// delete DELETEs the sandbox named name; success is 200 (or 202).
func (a sandboxAPI) delete(name string) outcome {
	o := outcome{kind: kindDelete, name: name, start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	res := a.raw.Delete().AbsPath(a.collectionPath(), name).MaxRetries(0).Do(ctx).StatusCode(&o.code)
	o.end = time.Now()
	if o.code == http.StatusAccepted {
		o.err = resultError(res.Error(), o.code, http.StatusAccepted)
	} else {
		o.err = resultError(res.Error(), o.code, http.StatusOK)
	}
	return o
}

// list GETs the namespace's sandboxes and returns their names, sorted;
// success is 200 with a list that decodes.
func (a sandboxAPI) list() ([]string, outcome) {
	o := outcome{kind: kindList, start: time.Now()}
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	defer cancel()
	raw, err := a.raw.Get().AbsPath(a.collectionPath()).MaxRetries(0).Do(ctx).StatusCode(&o.code).Raw()
	o.end = time.Now()
	if o.err = resultError(err, o.code, http.StatusOK); o.err != "" {
		return nil, o
	}
	var list struct {
		Items []struct {
			Metadata metav1.ObjectMeta `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		o.err = fmt.Sprintf("decode the list: %v", err)
		return nil, o
	}
	names := make([]string, 0, len(list.Items))
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	slices.Sort(names)
	return names, o
}

// get GETs the sandbox named name and returns the HTTP status (0 when no
// answer came) and the error for anything but 200.
func (a sandboxAPI) get(ctx context.Context, name string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var code int
	res := a.raw.Get().AbsPath(a.collectionPath(), name).MaxRetries(0).Do(ctx).StatusCode(&code)
	if msg := resultError(res.Error(), code, http.StatusOK); msg != "" {
		return code, fmt.Errorf("GET sandbox %s/%s: %s", a.namespace, name, msg)
	}
	return code, nil
}

// resultError describes a request that did not answer want; empty when
// it did.
func resultError(err error, code, want int) string {
	switch {
	case err != nil && code != 0:
		return fmt.Sprintf("%d: %v", code, err)
	case err != nil:
		return err.Error()
	case code != want:
		return fmt.Sprintf("answered %d, want %d", code, want)
	}
	return ""
}

// loadRun is a running load; stop ends it and returns what it saw.
type loadRun struct {
	api      sandboxAPI
	prefix   string
	stopped  chan struct{}
	stopOnce sync.Once
	wg       sync.WaitGroup

	mu       sync.Mutex
	outcomes []outcome
}

// startLoad starts the creators and the lister against api. Sandboxes are
// named <prefix>-<worker>-<sequence>.
func startLoad(api sandboxAPI, prefix string) *loadRun {
	l := &loadRun{api: api, prefix: prefix, stopped: make(chan struct{})}
	for w := range creators {
		l.wg.Go(func() { l.create(w) })
	}
	l.wg.Go(l.list)
	return l
}

// stop asks the workers to finish their current request, waits for them
// and returns every outcome, ordered by start. Requests in flight are not
// cancelled, which would record failures the fault did not cause. A test
// stops its load itself and again in a cleanup, for when it failed first.
func (l *loadRun) stop() []outcome {
	l.stopOnce.Do(func() { close(l.stopped) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	out := slices.Clone(l.outcomes)
	slices.SortFunc(out, func(a, b outcome) int { return a.start.Compare(b.start) })
	return out
}

// waitFor waits until cond accepts the outcomes the load has recorded so
// far (each a finished request), and fails the test with what and cond's
// last error if it does not. The load announces nothing, so its record
// is polled.
func (l *loadRun) waitFor(t *testing.T, what string, cond func([]outcome) error) {
	t.Helper()
	poll.UntilNil(t, what, func() error {
		l.mu.Lock()
		out := slices.Clone(l.outcomes)
		l.mu.Unlock()
		return cond(out)
	})
}

// waitWarm waits until every kind of request has succeeded n times, so
// that connections are warm and a fault has a "before" to compare with.
func (l *loadRun) waitWarm(t *testing.T, n int) {
	t.Helper()
	l.waitFor(t, fmt.Sprintf("every kind of request to succeed %d times before the fault", n), func(out []outcome) error {
		return eachKind(out, n, func(o outcome) bool { return o.ok() })
	})
}

// waitPast waits until n requests of every kind have started after at and
// finished, whatever their outcome: the requests a failure after at, which
// the tests forbid, would show up in.
func (l *loadRun) waitPast(t *testing.T, at time.Time, n int) {
	t.Helper()
	l.waitFor(t, fmt.Sprintf("%d requests of every kind started after the failure window", n), func(out []outcome) error {
		return eachKind(out, n, func(o outcome) bool { return o.start.After(at) })
	})
}

// eachKind is nil when every kind has at least n outcomes that match, and
// otherwise names the counts.
func eachKind(out []outcome, n int, match func(outcome) bool) error {
	counts := map[kind]int{}
	for _, o := range out {
		if match(o) {
			counts[o.kind]++
		}
	}
	for _, k := range kinds {
		if counts[k] < n {
			return fmt.Errorf("%d creates, %d deletes, %d lists", counts[kindCreate], counts[kindDelete], counts[kindList])
		}
	}
	return nil
}

func (l *loadRun) record(o outcome) {
	l.mu.Lock()
	l.outcomes = append(l.outcomes, o)
	l.mu.Unlock()
}

func (l *loadRun) stopping() bool {
	select {
	case <-l.stopped:
		return true
	default:
		return false
	}
}

// create is creator w's loop.
func (l *loadRun) create(w int) {
	var standing []string // created (201) by this worker and not deleted yet
	for i := 0; !l.stopping(); i++ {
		name := fmt.Sprintf("%s-%d-%04d", l.prefix, w, i)
		o := l.api.create(name)
		l.record(o)
		if o.ok() {
			standing = append(standing, name)
		}
		if i%2 == 1 && len(standing) > 0 {
			victim := standing[0]
			standing = standing[1:]
			l.record(l.api.delete(victim))
		}
		pause := createPauseMin + rand.N(createPauseMax-createPauseMin)
		select {
		case <-l.stopped:
		case <-time.After(pause):
		}
	}
}

// list is the lister's loop.
func (l *loadRun) list() {
	for !l.stopping() {
		_, o := l.api.list()
		l.record(o)
		select {
		case <-l.stopped:
		case <-time.After(listPause):
		}
	}
}
