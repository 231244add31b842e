// Package warmpool_test runs the warm-pool driver in-process against a real
// kube-apiserver (tests/cluster) and a publishing simulator fleet: the
// driver reads SandboxWarmPool and SandboxTemplate from the apiserver and
// the nodes from their published NodeInventory, and the test reads each
// node's pools back from its sandboxd.
package warmpool_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	inventoryv1beta1 "github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/src/warmpool"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	agentsandboxcrds "github.com/cocoonstack/sandbox-operator/tests/testdata/agentsandbox-crds"
)

const (
	token = "warmpool-integration-root-token"
	// waitTimeout bounds every wait; generous for a loaded two-core box.
	waitTimeout = 90 * time.Second
	// publishInterval and staleAfter make a killed node leave the fleet
	// view within seconds.
	publishInterval = 300 * time.Millisecond
	staleAfter      = 3 * time.Second
)

// Leader election timings of the tests: short, so a takeover is quick.
const (
	leaseDuration = 4 * time.Second
	renewDeadline = 3 * time.Second
	retryPeriod   = 500 * time.Millisecond
)

var logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))

func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.FromSlogHandler(logger.Handler()))
	os.Exit(m.Run())
}

// env is one cluster with the CRDs installed and a fleet view.
type env struct {
	c     *cluster.Cluster
	kube  client.Client
	store *inventory.Store
}

func startEnv(t testing.TB) *env {
	c := cluster.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	if err := c.InstallCRDs(ctx, crds.NodeInventoryYAML, agentsandboxcrds.SandboxTemplatesYAML, agentsandboxcrds.SandboxWarmPoolsYAML); err != nil {
		t.Fatal(err)
	}
	scheme := newScheme(t)
	kube, err := client.New(c.AdminConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	// The servers' own informer: typed objects straight from the watch.
	informer, err := inventory.NewInformer(c.AdminConfig())
	if err != nil {
		t.Fatal(err)
	}
	store, err := inventory.New(inventory.Config{Source: informer.SharedIndexInformer(), StaleAfter: staleAfter, Resync: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	informer.Start(runCtx.Done())
	wg.Go(func() { store.Run(runCtx) })
	t.Cleanup(func() { stop(); wg.Wait(); informer.Shutdown() })
	return &env{c: c, kube: kube, store: store}
}

// startFleet starts n publishing simulated nodes named prefix0…; each
// holds a pool nobody asked the driver for, which the driver's first PUT
// must drain.
func (e *env) startFleet(t testing.TB, prefix string, n int, tok string, adjust ...func(*simfleet.Config)) *simfleet.Fleet {
	cfg := simfleet.Config{
		Nodes: n, NamePrefix: prefix, RootToken: tok,
		Pools:             []sandboxd.PoolSpec{{Template: "static", Warm: 1}},
		RefillConcurrency: 64,
		EchoPorts:         []int{},
		Publish:           &simfleet.PublishConfig{Client: e.c.Dynamic(), Interval: publishInterval},
	}
	for _, a := range adjust {
		a(&cfg)
	}
	f, err := simfleet.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = f.Close()
		// Leave no inventory behind for the next subtest's fleet view.
		for _, node := range f.Nodes() {
			_ = e.c.Dynamic().Resource(inventoryv1beta1.NodeInventoryGVR).Delete(context.Background(), node.Name(), metav1.DeleteOptions{})
		}
	})
	return f
}

// startDriver runs a driver until the test ends.
func (e *env) startDriver(t testing.TB, ns, identity, tok string) (*warmpool.Driver, context.CancelFunc) {
	d, err := warmpool.New(warmpool.Config{
		RESTConfig:       e.c.AdminConfig(),
		Nodes:            e.store,
		Token:            tok,
		SyncInterval:     time.Second,
		NodePollInterval: 200 * time.Millisecond,
		LeaseNamespace:   ns,
		Identity:         identity,
		LeaseDuration:    leaseDuration,
		RenewDeadline:    renewDeadline,
		RetryPeriod:      retryPeriod,
		RebuildDelay:     500 * time.Millisecond,
		Logger:           logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	stop := func() { cancel(); <-done }
	t.Cleanup(stop)
	return d, stop
}

func (e *env) namespace(t testing.TB, name string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := e.kube.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	// Drivers are cluster-wide and the test cluster runs no namespace
	// controller: leave no pool behind for the next scenario.
	t.Cleanup(func() {
		_ = e.kube.DeleteAllOf(context.Background(), &extv1beta1.SandboxWarmPool{}, client.InNamespace(name))
	})
	return name
}

// apply creates a template with image and a warm pool of replicas on it.
func (e *env) apply(t testing.TB, ns, name, image string, replicas int32) {
	ctx := context.Background()
	tpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: extv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: image}}}},
		}},
	}
	if err := e.kube.Create(ctx, tpl); err != nil {
		t.Fatalf("create template: %v", err)
	}
	e.createPool(t, ns, name, name, replicas)
}

func (e *env) createPool(t testing.TB, ns, name, template string, replicas int32) {
	wp := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(replicas), TemplateRef: extv1beta1.SandboxTemplateRef{Name: template}},
	}
	if err := e.kube.Create(context.Background(), wp); err != nil {
		t.Fatalf("create warm pool: %v", err)
	}
}

func (e *env) scale(t testing.TB, ns, name string, replicas int32) {
	wp := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if err := e.kube.Patch(context.Background(), wp, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("scale %s/%s: %v", ns, name, err)
	}
}

func (e *env) pool(t testing.TB, ns, name string) *extv1beta1.SandboxWarmPool {
	var wp extv1beta1.SandboxWarmPool
	if err := e.kube.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: name}, &wp); err != nil {
		t.Fatal(err)
	}
	return &wp
}

// eventually polls cond (with poll, the one poll helper) until it holds,
// and fails the test with what and cond's last state if it does not.
func eventually(t testing.TB, what string, cond func() (bool, string)) {
	t.Helper()
	poll.UntilNil(t, what, func() error {
		if ok, state := cond(); !ok {
			return fmt.Errorf("last state: %s", state)
		}
		return nil
	})
}

// nodeTargets reads every live node's pool targets from its sandboxd.
func nodeTargets(f *simfleet.Fleet, tok string) map[string]map[sandbox.PoolKey]int {
	out := map[string]map[sandbox.PoolKey]int{}
	for i, n := range f.Nodes() {
		if !f.Alive(i) {
			continue
		}
		c, err := sandboxd.New(n.Addr(), sandboxd.WithToken(tok))
		if err != nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := c.Info(ctx)
		cancel()
		if err != nil {
			continue
		}
		pools := map[sandbox.PoolKey]int{}
		for _, p := range info.Pools {
			pools[p.Key] = p.Target
		}
		out[n.Name()] = pools
	}
	return out
}

// placedAsExpected holds when the live nodes of fleets hold exactly
// warmpool.Place's shares of key over them, and no other pool.
func placedAsExpected(key sandbox.PoolKey, replicas int, fleets ...*simfleet.Fleet) (bool, string) {
	var names []string
	got := map[string]map[sandbox.PoolKey]int{}
	for _, f := range fleets {
		for name, pools := range nodeTargets(f, token) {
			names = append(names, name)
			got[name] = pools
		}
	}
	want := warmpool.Place(key, replicas, names)
	for _, name := range names {
		pools := got[name]
		if pools[key] != want[name] {
			return false, fmt.Sprintf("nodes hold %v, want %v of %s", got, want, key)
		}
		for k := range pools {
			if k != key {
				return false, fmt.Sprintf("node %s still holds %s: %v", name, k, got)
			}
		}
	}
	return true, ""
}

func keyOf(image string) sandbox.PoolKey {
	return sandbox.PoolKey{Template: image, Net: sandbox.DefaultNet, Size: sandbox.DefaultSize}
}
