package fill

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cocoonstack/sandbox-operator/tools/scale/stats"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	inventoryv1beta1 "github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/warmpool"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	agentsandboxcrds "github.com/cocoonstack/sandbox-operator/tests/testdata/agentsandbox-crds"
)

// Defaults of Config.
const (
	DefaultNodes           = 20
	DefaultReplicas        = 50000
	DefaultRuns            = 3
	DefaultPollConcurrency = 64
	DefaultTimeout         = 10 * time.Minute
	// DefaultPublishInterval is the fleet's NodeInventory period: the
	// production default, so a thousand publishers add about 33 writes a
	// second rather than load the machine being measured.
	DefaultPublishInterval = 30 * time.Second
)

// How Run observes the nodes (Config.Observe).
const (
	// ObserveInfo reads each node's GET /v1/info over HTTP, as any client
	// sees the node, PollConcurrency at a time.
	ObserveInfo = "info"
	// ObserveSnapshot reads each simulated node's state in this process
	// (no HTTP, no JSON): at a thousand nodes the Info polling competes
	// with the driver for the CPU and inflates what it measures; this
	// costs a small fraction of that.
	ObserveSnapshot = "snapshot"
)

// refillConcurrency is the simulated nodes' clone limit; with a refill
// delay of 0 an unisolated node fills a pool at once and the limit never
// binds, but it stays high so it cannot be what is measured.
const refillConcurrency = 4096

// deleteConcurrency bounds the NodeInventory deletes in flight at
// clean-up.
const deleteConcurrency = 32

// cleanupTimeout bounds the clean-up, which runs even when ctx has ended.
const cleanupTimeout = 3 * time.Minute

// Config configures one measurement.
type Config struct {
	// Cluster is the running kube-apiserver the driver and the fleet use.
	// Required. Run installs the CRDs it needs (NodeInventory,
	// SandboxTemplate, SandboxWarmPool) and must be the only warm-pool
	// driver on it while it runs.
	Cluster *cluster.Cluster
	// Nodes is the fleet size; default DefaultNodes.
	Nodes int
	// Replicas is the SandboxWarmPool's replicas in each run; default
	// DefaultReplicas.
	Replicas int
	// Runs is how many times the pool is scaled 0 → Replicas (and back
	// to 0 between runs); default DefaultRuns.
	Runs int
	// Observe is how the nodes are read while waiting: ObserveInfo
	// (default) or ObserveSnapshot.
	Observe string
	// PollConcurrency bounds the GET /v1/info in flight while waiting
	// (ObserveInfo); default DefaultPollConcurrency.
	PollConcurrency int
	// SyncInterval is the driver's full resync period; 0 is the driver's
	// default (warmpool.DefaultSyncInterval). A patch is acted on at once
	// through the watch, not on this period.
	SyncInterval time.Duration
	// PublishInterval is the fleet's NodeInventory period; default
	// DefaultPublishInterval.
	PublishInterval time.Duration
	// Timeout bounds each wait (fleet view, one fill, its status, one
	// drain); default DefaultTimeout.
	Timeout time.Duration
	// Logf receives progress lines and the driver's warnings; nil
	// discards them.
	Logf func(format string, args ...any)
}

// Result is one measurement.
type Result struct {
	Nodes    int `json:"nodes"`
	Replicas int `json:"replicas"`
	// ShareMin and ShareMax are the smallest and largest per-node shares
	// (warmpool.Place).
	ShareMin int `json:"share_min"`
	ShareMax int `json:"share_max"`

	// The settings measured with. PollConcurrency is 1 for the
	// snapshot observer, which never waits on the network.
	Observe          string  `json:"observe"`
	PollConcurrency  int     `json:"poll_concurrency"`
	SyncIntervalS    float64 `json:"driver_sync_interval_s"`
	PutParallelism   int     `json:"driver_put_parallelism"`
	PublishIntervalS float64 `json:"publish_interval_s"`

	// FleetStartS is how long starting the simulated nodes took;
	// FleetViewS how long after that the driver's view held them all.
	FleetStartS float64 `json:"fleet_start_s"`
	FleetViewS  float64 `json:"fleet_view_s"`

	Runs []RunResult `json:"runs"`

	// Medians over Runs.
	TargetMedianS        float64 `json:"target_median_s"`
	WarmMedianS          float64 `json:"warm_median_s"`
	WritesMedian         int     `json:"apiserver_writes_median"`
	StatusMedianS        float64 `json:"status_median_s"`
	WritesToStatusMedian int     `json:"apiserver_writes_to_status_median"`
	PollPeriodMedianMs   float64 `json:"poll_period_median_ms"`
}

// RunResult is one scale from 0 to Replicas.
type RunResult struct {
	// TargetS is the time from the patch until every node had been seen
	// with its share as target; WarmS until every node had been seen
	// holding its share warm. Both are observations, late by up to one
	// poll period (Poll.PeriodMs).
	TargetS float64 `json:"target_s"`
	WarmS   float64 `json:"warm_s"`
	// Writes are the kube-apiserver's write requests from just before the
	// patch (which is one of them) until the fleet was warm, by resource.
	// They include every writer on the cluster: the driver's status
	// writes and events, its lease renewals, the fleet's NodeInventory
	// publishes and anything else running then.
	Writes Writes `json:"apiserver_writes"`
	// DriverPuts is how many PUT /v1/pools the driver sent to the nodes
	// in the same window.
	DriverPuts int64 `json:"driver_puts"`
	// StatusS is the time from the patch until the SandboxWarmPool's
	// status reported every replica ready: the driver samples the warm
	// counts on its full resync, so this trails WarmS by up to
	// SyncInterval. WritesToStatus are the writes until then, which
	// hold the driver's status write and event for the fill.
	StatusS        float64 `json:"status_s"`
	WritesToStatus Writes  `json:"apiserver_writes_to_status"`
	// Poll describes the polling of the fill; DrainS is how long the
	// scale back to 0 after it took to reach every node.
	Poll   PollStats `json:"poll"`
	DrainS float64   `json:"drain_s"`
}

func (c *Config) defaults() error {
	if c.Cluster == nil {
		return errors.New("fill: Config.Cluster is required")
	}
	if c.Nodes <= 0 {
		c.Nodes = DefaultNodes
	}
	if c.Replicas <= 0 {
		c.Replicas = DefaultReplicas
	}
	if c.Runs <= 0 {
		c.Runs = DefaultRuns
	}
	switch c.Observe {
	case "":
		c.Observe = ObserveInfo
	case ObserveInfo, ObserveSnapshot:
	default:
		return fmt.Errorf("fill: Config.Observe %q is neither %q nor %q", c.Observe, ObserveInfo, ObserveSnapshot)
	}
	if c.PollConcurrency <= 0 {
		c.PollConcurrency = DefaultPollConcurrency
	}
	if c.SyncInterval <= 0 {
		c.SyncInterval = warmpool.DefaultSyncInterval
	}
	if c.PublishInterval <= 0 {
		c.PublishInterval = DefaultPublishInterval
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Run measures cfg.Runs fills of one SandboxWarmPool over a fresh fleet of
// cfg.Nodes simulated nodes, and removes everything it started and created
// (fleet, driver, inventories, namespace) before it returns. A failure to
// clean up is returned with the result.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.defaults(); err != nil {
		return Result{}, err
	}
	b := &bench{cfg: cfg}
	defer func() {
		if cerr := b.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("fill: clean-up: %w", cerr))
		}
	}()
	if err := b.setup(ctx); err != nil {
		return Result{}, fmt.Errorf("fill: %w", err)
	}
	res = Result{
		Nodes: cfg.Nodes, Replicas: cfg.Replicas,
		Observe:          cfg.Observe,
		PollConcurrency:  b.poller.concurrency,
		SyncIntervalS:    cfg.SyncInterval.Seconds(),
		PutParallelism:   warmpool.DefaultPutParallelism,
		PublishIntervalS: cfg.PublishInterval.Seconds(),
		FleetStartS:      b.fleetStart.Seconds(),
		FleetViewS:       b.fleetView.Seconds(),
	}
	res.ShareMin, res.ShareMax = shareRange(b.want, b.names)
	for i := range cfg.Runs {
		r, err := b.run(ctx)
		if err != nil {
			return res, fmt.Errorf("fill: run %d of %d: %w", i+1, cfg.Runs, err)
		}
		cfg.Logf("fill: run %d/%d at %d nodes: target %.3fs, warm %.3fs (%d apiserver writes, %d driver PUTs, poll period %.1fms), status %.3fs (%d writes); drained in %.3fs",
			i+1, cfg.Runs, cfg.Nodes, r.TargetS, r.WarmS, r.Writes.Total, r.DriverPuts, r.Poll.PeriodMs, r.StatusS, r.WritesToStatus.Total, r.DrainS)
		res.Runs = append(res.Runs, r)
	}
	res.TargetMedianS = stats.Median(collect(res.Runs, func(r RunResult) float64 { return r.TargetS }))
	res.WarmMedianS = stats.Median(collect(res.Runs, func(r RunResult) float64 { return r.WarmS }))
	res.WritesMedian = int(stats.Median(collect(res.Runs, func(r RunResult) float64 { return float64(r.Writes.Total) })))
	res.StatusMedianS = stats.Median(collect(res.Runs, func(r RunResult) float64 { return r.StatusS }))
	res.WritesToStatusMedian = int(stats.Median(collect(res.Runs, func(r RunResult) float64 { return float64(r.WritesToStatus.Total) })))
	res.PollPeriodMedianMs = stats.Median(collect(res.Runs, func(r RunResult) float64 { return r.Poll.PeriodMs }))
	return res, nil
}

// bench is one measurement's state; cleanup undoes whatever setup got to.
type bench struct {
	cfg    Config
	suffix string
	ns     string
	key    sandbox.PoolKey
	kube   client.Client

	fleet      *simfleet.Fleet
	names      []string
	want       map[string]int // each node's share of cfg.Replicas
	poller     *nodePoller
	driver     *warmpool.Driver
	fleetStart time.Duration
	fleetView  time.Duration

	stops     []func() // stop what runs in this process, in reverse
	driverLog driverLog
}

func (b *bench) setup(ctx context.Context) error {
	cfg := b.cfg
	c := cfg.Cluster
	b.suffix = randomHex(3)
	b.ns = "scale-fill-" + b.suffix
	b.key = sandbox.PoolKey{Template: "registry.example/scale-fill:" + b.suffix, Net: sandbox.DefaultNet, Size: sandbox.DefaultSize}
	token := randomHex(16) // the fleet's root token, for the driver and the poller

	if err := c.InstallCRDs(ctx, crds.NodeInventoryYAML, agentsandboxcrds.SandboxTemplatesYAML, agentsandboxcrds.SandboxWarmPoolsYAML); err != nil {
		return fmt.Errorf("installing the CRDs: %w", err)
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	if err := extv1beta1.AddToScheme(scheme); err != nil {
		return fmt.Errorf("scheme: %w", err)
	}
	var err error
	if b.kube, err = client.New(c.AdminConfig(), client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	if err := b.kube.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}}); err != nil {
		return fmt.Errorf("creating namespace %s: %w", b.ns, err)
	}
	// Its own client for the publishers and the informer, so their rate
	// limit is not shared with whatever else uses the cluster's.
	dyn, err := dynamic.NewForConfig(c.AdminConfig())
	if err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}

	cfg.Logf("fill: starting %d simulated nodes (unisolated, refill delay 0, NodeInventory every %v)", cfg.Nodes, cfg.PublishInterval)
	began := time.Now()
	b.fleet, err = simfleet.Start(context.Background(), simfleet.Config{
		Nodes: cfg.Nodes, NamePrefix: "fill-" + b.suffix + "-", RootToken: token,
		RefillConcurrency: refillConcurrency, EchoPorts: []int{},
		Publish: &simfleet.PublishConfig{Client: dyn, Interval: cfg.PublishInterval},
	})
	if err != nil {
		return fmt.Errorf("starting the fleet: %w", err)
	}
	b.fleetStart = time.Since(began)
	var addrs []string
	for _, n := range b.fleet.Nodes() {
		b.names = append(b.names, n.Name())
		addrs = append(addrs, n.Addr())
	}
	b.want = warmpool.Place(b.key, cfg.Replicas, b.names)
	if cfg.Observe == ObserveSnapshot {
		b.poller = newSnapshotPoller(b.fleet, b.key)
	} else if b.poller, err = newInfoPoller(b.names, addrs, token, b.key, cfg.PollConcurrency); err != nil {
		return err
	}

	// The driver's fleet view: this fleet's fresh inventories only, so a
	// node another measurement left published is never given a share.
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	informer := factory.ForResource(inventoryv1beta1.NodeInventoryGVR).Informer()
	store, err := inventory.New(inventory.Config{Source: informer})
	if err != nil {
		return fmt.Errorf("inventory store: %w", err)
	}
	runCtx, stopView := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	factory.Start(runCtx.Done())
	wg.Go(func() { store.Run(runCtx) })
	b.stops = append(b.stops, func() { stopView(); wg.Wait(); factory.Shutdown() })
	nodes := fleetNodes{store: store, members: make(map[string]bool, len(b.names))}
	for _, n := range b.names {
		nodes.members[n] = true
	}

	tpl := &extv1beta1.SandboxTemplate{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "fill"},
		Spec: extv1beta1.SandboxTemplateSpec{SandboxBlueprint: agentsv1beta1.SandboxBlueprint{
			PodTemplate: agentsv1beta1.PodTemplate{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: b.key.Template}}}},
		}},
	}
	if err := b.kube.Create(ctx, tpl); err != nil {
		return fmt.Errorf("creating the SandboxTemplate: %w", err)
	}
	wp := &extv1beta1.SandboxWarmPool{
		ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "fill"},
		Spec:       extv1beta1.SandboxWarmPoolSpec{Replicas: ptr.To(int32(0)), TemplateRef: extv1beta1.SandboxTemplateRef{Name: "fill"}},
	}
	if err := b.kube.Create(ctx, wp); err != nil {
		return fmt.Errorf("creating the SandboxWarmPool: %w", err)
	}

	b.driverLog.logf = cfg.Logf
	driverLogger := slog.New(slog.NewTextHandler(&b.driverLog, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// controller-runtime logs through its own global logger, and prints a
	// stack trace when nothing was set: give it the driver's, as
	// sandbox-apiserver does.
	ctrllog.SetLogger(logr.FromSlogHandler(driverLogger.Handler()))
	b.driver, err = warmpool.New(warmpool.Config{
		RESTConfig: c.AdminConfig(), Nodes: nodes, Token: token,
		SyncInterval: cfg.SyncInterval, LeaseNamespace: b.ns, Identity: "scale-fill-" + b.suffix,
		Logger: driverLogger,
	})
	if err != nil {
		return fmt.Errorf("building the warm-pool driver: %w", err)
	}
	driverCtx, stopDriver := context.WithCancel(context.Background())
	driverDone := make(chan struct{})
	go func() { defer close(driverDone); _ = b.driver.Run(driverCtx) }()
	b.stops = append(b.stops, func() { stopDriver(); <-driverDone })

	began = time.Now()
	if err := waitFor(ctx, cfg.Timeout, "every node in the driver's fleet view", func() (bool, string) {
		n := len(nodes.Nodes())
		return n == cfg.Nodes, fmt.Sprintf("%d of %d nodes", n, cfg.Nodes)
	}); err != nil {
		return err
	}
	b.fleetView = time.Since(began)
	if err := waitFor(ctx, cfg.Timeout, "the driver leads", func() (bool, string) { return b.driver.Leading(), "not leading" }); err != nil {
		return err
	}
	// Its first pass PUTs every node; let it finish so the first run
	// does not pay for it.
	if err := waitFor(ctx, cfg.Timeout, "the driver's first pass", func() (bool, string) {
		p := b.driver.Puts()
		return p >= int64(cfg.Nodes), fmt.Sprintf("%d of %d nodes PUT", p, cfg.Nodes)
	}); err != nil {
		return err
	}
	cfg.Logf("fill: %d nodes up in %.1fs, in the driver's view %.1fs later", cfg.Nodes, b.fleetStart.Seconds(), b.fleetView.Seconds())
	return nil
}

// run scales the pool 0 → Replicas, waits for every node's target and
// warm count, then scales back to 0 and waits for every node to drain.
func (b *bench) run(ctx context.Context) (RunResult, error) {
	cfg := b.cfg
	kc := cfg.Cluster.Clientset()
	before, err := readWrites(ctx, kc)
	if err != nil {
		return RunResult{}, err
	}
	putsBefore := b.driver.Puts()
	start := time.Now()
	if err := b.scale(ctx, cfg.Replicas); err != nil {
		return RunResult{}, err
	}
	seen, err := b.poller.await(ctx, b.want, cfg.Timeout)
	if err != nil {
		return RunResult{}, fmt.Errorf("filling to %d: %w", cfg.Replicas, err)
	}
	after, err := readWrites(ctx, kc)
	if err != nil {
		return RunResult{}, err
	}
	r := RunResult{
		TargetS:    seen.target.Sub(start).Seconds(),
		WarmS:      seen.warm.Sub(start).Seconds(),
		Writes:     after.Minus(before),
		DriverPuts: b.driver.Puts() - putsBefore,
		Poll:       seen.stats,
	}
	settled, err := b.awaitStatus(ctx, cfg.Replicas)
	if err != nil {
		return RunResult{}, err
	}
	r.StatusS = settled.Sub(start).Seconds()
	atStatus, err := readWrites(ctx, kc)
	if err != nil {
		return RunResult{}, err
	}
	r.WritesToStatus = atStatus.Minus(before)

	start = time.Now()
	if err := b.scale(ctx, 0); err != nil {
		return RunResult{}, err
	}
	drained, err := b.poller.await(ctx, nil, cfg.Timeout)
	if err != nil {
		return RunResult{}, fmt.Errorf("draining to 0: %w", err)
	}
	r.DrainS = later(drained.target, drained.warm).Sub(start).Seconds()
	// The next run's counts start once the driver has reported the drain.
	if _, err := b.awaitStatus(ctx, 0); err != nil {
		return RunResult{}, err
	}
	return r, nil
}

// awaitStatus waits until the pool's status has caught up with replicas
// (every one of them ready) and returns when it was first seen so.
func (b *bench) awaitStatus(ctx context.Context, replicas int) (time.Time, error) {
	var seen time.Time
	err := waitFor(ctx, b.cfg.Timeout, fmt.Sprintf("status of %s/fill at %d ready", b.ns, replicas), func() (bool, string) {
		var wp extv1beta1.SandboxWarmPool
		if err := b.kube.Get(ctx, types.NamespacedName{Namespace: b.ns, Name: "fill"}, &wp); err != nil {
			return false, err.Error()
		}
		st := wp.Status
		if st.ObservedGeneration == wp.Generation && int(st.Replicas) == replicas && int(st.ReadyReplicas) == replicas {
			seen = time.Now()
			return true, ""
		}
		return false, fmt.Sprintf("generation %d, status %+v", wp.Generation, st)
	})
	return seen, err
}

func (b *bench) scale(ctx context.Context, replicas int) error {
	wp := &extv1beta1.SandboxWarmPool{ObjectMeta: metav1.ObjectMeta{Namespace: b.ns, Name: "fill"}}
	patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)
	if err := b.kube.Patch(ctx, wp, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("scaling SandboxWarmPool %s/fill to %d: %w", b.ns, replicas, err)
	}
	return nil
}

// cleanup stops the driver, the fleet view and the fleet, then deletes
// what was created on the cluster. The test cluster runs no namespace
// controller, so the namespace's objects are deleted one by one first.
func (b *bench) cleanup() error {
	b.driverLog.quiet.Store(true)
	for _, stop := range slices.Backward(b.stops) {
		stop()
	}
	var errs []error
	if b.poller != nil {
		b.poller.stop()
	}
	if b.fleet != nil {
		if err := b.fleet.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the fleet: %w", err))
		}
	}
	if b.kube == nil {
		return errors.Join(errs...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	// The dead nodes' inventories would stay fresh for a while and make
	// another measurement's view place pools on them.
	errs = append(errs, deleteInventories(ctx, b.cfg.Cluster.Dynamic(), b.names, deleteConcurrency))
	inNS := client.InNamespace(b.ns)
	for _, obj := range []client.Object{
		&extv1beta1.SandboxWarmPool{}, &extv1beta1.SandboxTemplate{}, &coordinationv1.Lease{}, &eventsv1.Event{},
	} {
		if err := b.kube.DeleteAllOf(ctx, obj, inNS); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting %T in %s: %w", obj, b.ns, err))
		}
	}
	if b.ns != "" {
		if err := b.kube.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: b.ns}}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting namespace %s: %w", b.ns, err))
		}
	}
	return errors.Join(errs...)
}

// deleteInventories deletes the named NodeInventory objects, concurrency
// at a time.
func deleteInventories(ctx context.Context, dyn dynamic.Interface, names []string, concurrency int) error {
	api := dyn.Resource(inventoryv1beta1.NodeInventoryGVR)
	var mu sync.Mutex
	var errs []error
	next := make(chan string)
	var wg sync.WaitGroup
	for range min(max(concurrency, 1), len(names)) {
		wg.Go(func() {
			for name := range next {
				if err := api.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
					mu.Lock()
					errs = append(errs, fmt.Errorf("deleting NodeInventory %s: %w", name, err))
					mu.Unlock()
				}
			}
		})
	}
	for _, n := range names {
		next <- n
	}
	close(next)
	wg.Wait()
	if len(errs) > 3 {
		errs = append(errs[:3], fmt.Errorf("and %d more", len(errs)-3))
	}
	return errors.Join(errs...)
}

// fleetNodes is the driver's NodeLister: the store's fresh nodes that
// belong to this measurement's fleet.
type fleetNodes struct {
	store   *inventory.Store
	members map[string]bool
}

func (f fleetNodes) Nodes() []inventory.Node {
	all := f.store.Nodes()
	out := all[:0:0]
	for _, n := range all {
		if f.members[n.Name] {
			out = append(out, n)
		}
	}
	return out
}

// waitFor polls cond every 50 ms until it holds, timeout passes or ctx
// ends; the error names what was awaited and its last state.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not reached within %v (%s)", what, timeout, state)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (%s)", what, ctx.Err(), state)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// shareRange is the smallest and largest share over every node, a node
// without one counting as 0.
func shareRange(want map[string]int, names []string) (lo, hi int) {
	for i, n := range names {
		s := want[n]
		if i == 0 || s < lo {
			lo = s
		}
		hi = max(hi, s)
	}
	return lo, hi
}

func collect[T any](items []T, f func(T) float64) []float64 {
	out := make([]float64, len(items))
	for i, it := range items {
		out[i] = f(it)
	}
	return out
}

// randomHex is n random bytes in hex: three keep the names of
// successive measurements apart, sixteen make a token.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// driverLog passes the driver's warnings and errors on to Logf until
// clean-up starts; a driver being stopped reports its lost lease and
// dropped events as errors, which are expected then and only noise.
type driverLog struct {
	logf  func(format string, args ...any)
	quiet atomic.Bool
}

var _ io.Writer = (*driverLog)(nil)

func (l *driverLog) Write(p []byte) (int, error) {
	if !l.quiet.Load() {
		l.logf("fill: warm-pool driver: %s", strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
