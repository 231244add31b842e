package warmpool

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache/informertest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// recorder is an Observer that keeps every call.
type recorder struct {
	mu      sync.Mutex
	passes  []error
	pushes  []error
	leading []bool
}

func (r *recorder) ObservePass(_ time.Duration, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.passes = append(r.passes, err)
}

func (r *recorder) ObservePush(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pushes = append(r.pushes, err)
}

func (r *recorder) ObserveLeading(on bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.leading = append(r.leading, on)
}

// counts answers how many passes and pushes succeeded and failed.
func (r *recorder) counts() (passOK, passFailed, pushOK, pushFailed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, err := range r.passes {
		if err == nil {
			passOK++
		} else {
			passFailed++
		}
	}
	for _, err := range r.pushes {
		if err == nil {
			pushOK++
		} else {
			pushFailed++
		}
	}
	return
}

func (r *recorder) calls() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.passes) + len(r.pushes) + len(r.leading)
}

func (r *recorder) leadingTurns() []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.leading)
}

type fixedNodes []inventory.Node

func (n fixedNodes) Nodes() []inventory.Node { return n }

func driverScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	if err := extv1beta1.AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	return s
}

// warmPoolObjects are one SandboxWarmPool of two replicas of baseKey's
// template and the SandboxTemplate it names.
func warmPoolObjects() []client.Object {
	replicas := int32(2)
	return []client.Object{
		&extv1beta1.SandboxTemplate{ObjectMeta: metav1.ObjectMeta{
			Namespace: "team", Name: "base",
			Annotations: map[string]string{sandbox.AnnotationTemplate: baseKey.Template},
		}},
		&extv1beta1.SandboxWarmPool{
			ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "base-pool"},
			Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: &replicas, TemplateRef: extv1beta1.SandboxTemplateRef{Name: "base"}},
		},
	}
}

// observedReconciler is the leader's loop over c and nodes, telling obs,
// on a fake clock that never ticks unless stepped.
func observedReconciler(t *testing.T, c client.Client, nodes NodeLister, obs Observer) *reconciler {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	push := newPusher(testToken, 10*time.Second, 4, log)
	push.observe = obs
	return &reconciler{
		client: c, cache: &informertest.FakeInformers{Scheme: driverScheme(t)}, nodes: nodes,
		push: push, events: newEventLog(nil), log: log,
		clock: clocktesting.NewFakeClock(time.Now()), sync: time.Minute, poll: time.Minute,
		leading: func(bool) {}, observe: obs,
	}
}

// TestPassesAndPushesObserved: a pass that sets one simulated node's
// pools and is refused by another succeeds, with one push of each
// outcome; a pass that cannot list the SandboxWarmPools fails; a pass cut
// short by the end of this replica's turn is not told at all.
func TestPassesAndPushesObserved(t *testing.T) {
	taking, takingClient := startSimNode(t, "node-taking", testToken)
	refusing, _ := startSimNode(t, "node-refusing", "another-token")
	nodes := fixedNodes{
		{Name: taking.Name(), Address: taking.Addr(), Fresh: true},
		{Name: refusing.Name(), Address: refusing.Addr(), Fresh: true},
	}
	c := fake.NewClientBuilder().WithScheme(driverScheme(t)).WithObjects(warmPoolObjects()...).
		WithStatusSubresource(&extv1beta1.SandboxWarmPool{}).Build()
	rec := &recorder{}
	r := observedReconciler(t, c, nodes, rec)

	r.passLogged(context.Background(), true)
	if passOK, passFailed, pushOK, pushFailed := rec.counts(); passOK != 1 || passFailed != 0 || pushOK != 1 || pushFailed != 1 {
		t.Fatalf("after a pass over a taking and a refusing node: passes %d ok, %d failed; pushes %d ok, %d failed; want 1, 0, 1, 1",
			passOK, passFailed, pushOK, pushFailed)
	}
	for key := range poolsOf(t, takingClient) {
		if key.Template != baseKey.Template {
			t.Fatalf("the taking node still has pool %s: the driver's set did not replace its own", key)
		}
	}

	down := fake.NewClientBuilder().WithScheme(driverScheme(t)).WithInterceptorFuncs(interceptor.Funcs{
		List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
			return errors.New("the apiserver is unreachable")
		},
	}).Build()
	observedReconciler(t, down, nodes, rec).passLogged(context.Background(), true)
	if _, passFailed, _, _ := rec.counts(); passFailed != 1 {
		t.Fatalf("a pass that could not list the SandboxWarmPools: %d failed passes, want 1", passFailed)
	}

	ended, cancel := context.WithCancel(context.Background())
	cancel()
	before := rec.calls()
	r.passLogged(ended, true)
	if after := rec.calls(); after != before {
		t.Fatalf("a pass after this replica stopped driving was told: %d calls before, %d after", before, after)
	}
}

// TestLeadingObserved runs the leader's loop as the Driver wires it: the
// driver says it drives once its caches synced, runs its first pass, and
// says it stopped when its turn ends.
func TestLeadingObserved(t *testing.T) {
	n, _ := startSimNode(t, "node-a", testToken)
	c := fake.NewClientBuilder().WithScheme(driverScheme(t)).WithObjects(warmPoolObjects()...).
		WithStatusSubresource(&extv1beta1.SandboxWarmPool{}).Build()
	rec := &recorder{}
	// Token-less, New builds no manager: the test runs the loop itself.
	d, err := New(Config{RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Nodes: noNodes{}, Identity: "observed", LeaseNamespace: "ns", Observer: rec})
	if err != nil {
		t.Fatal(err)
	}
	r := observedReconciler(t, c, fixedNodes{{Name: n.Name(), Address: n.Addr(), Fresh: true}}, rec)
	r.leading = d.drives

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Start(ctx) }()
	poll.Until(t, "the first pass of the leader's loop", func() bool {
		passOK, _, _, _ := rec.counts()
		return passOK == 1
	})
	if got := rec.leadingTurns(); !slices.Equal(got, []bool{true}) || !d.Leading() {
		t.Fatalf("while driving, leading was told %v and Leading is %v, want [true] and true", got, d.Leading())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the loop ended with %v", err)
	}
	if got := rec.leadingTurns(); !slices.Equal(got, []bool{true, false}) || d.Leading() {
		t.Fatalf("after the turn ended, leading was told %v and Leading is %v, want [true false] and false", got, d.Leading())
	}
}
