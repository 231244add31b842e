package warmpool

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
)

// LeaseName is the Lease the driver replicas elect a leader on.
const LeaseName = "cocoon-warmpool-driver"

// Defaults of Config.
const (
	DefaultSyncInterval     = 5 * time.Second
	DefaultRebuildDelay     = 5 * time.Second
	DefaultNodePollInterval = time.Second
	DefaultLeaseDuration    = 15 * time.Second
	DefaultRenewDeadline    = 10 * time.Second
	DefaultRetryPeriod      = 2 * time.Second
	DefaultPutTimeout       = 10 * time.Second
	DefaultPutParallelism   = 16
)

// Config configures a Driver.
type Config struct {
	// RESTConfig reaches the kube-apiserver serving SandboxWarmPool,
	// SandboxTemplate, Lease and Event. Required.
	RESTConfig *rest.Config
	// Nodes is the fresh fleet view (an *inventory.Store). Required.
	Nodes NodeLister
	// Token is the sandboxd root token presented to every node. Empty
	// leaves the driver fail-closed: it logs once and sets no pools.
	Token string

	// SyncInterval is the resync period (every node is PUT again) and the
	// sampling period of the warm counts in status; 0 means 5 s.
	SyncInterval time.Duration
	// NodePollInterval is how often the node set is compared with the last
	// placement and refused PUTs retried; 0 means 1 s.
	NodePollInterval time.Duration

	// LeaseNamespace holds the Lease; "" means DefaultLeaseNamespace().
	LeaseNamespace string
	// Identity is this replica's name in the Lease; "" means hostname_uuid.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are the leader election
	// timings; 0 means 15 s, 10 s and 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// RebuildDelay is the pause before a stopped driver is built again;
	// 0 means 5 s.
	RebuildDelay time.Duration

	// PutTimeout bounds one PUT /v1/pools; 0 means 10 s.
	PutTimeout time.Duration
	// PutParallelism bounds PUTs in flight; 0 means 16.
	PutParallelism int

	// Logger receives the driver's and controller-runtime's logs; nil
	// discards them.
	Logger *slog.Logger
	// Clock times the resyncs, node polls and rebuild pauses; nil is the
	// real clock.
	Clock clock.WithTicker
	// Observer hears of the passes, the PUTs and this replica's turns at
	// driving; nil hears nothing.
	Observer Observer
}

func (c *Config) defaults() error {
	if c.RESTConfig == nil {
		return errors.New("warm-pool driver: RESTConfig is required")
	}
	if c.Nodes == nil {
		return errors.New("warm-pool driver: Nodes is required")
	}
	for name, d := range map[string]time.Duration{
		"SyncInterval": c.SyncInterval, "NodePollInterval": c.NodePollInterval,
		"LeaseDuration": c.LeaseDuration, "RenewDeadline": c.RenewDeadline, "RetryPeriod": c.RetryPeriod,
		"RebuildDelay": c.RebuildDelay, "PutTimeout": c.PutTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("warm-pool driver: negative %s %v", name, d)
		}
	}
	setDefault(&c.SyncInterval, DefaultSyncInterval)
	setDefault(&c.NodePollInterval, DefaultNodePollInterval)
	setDefault(&c.LeaseDuration, DefaultLeaseDuration)
	setDefault(&c.RenewDeadline, DefaultRenewDeadline)
	setDefault(&c.RetryPeriod, DefaultRetryPeriod)
	setDefault(&c.RebuildDelay, DefaultRebuildDelay)
	setDefault(&c.PutTimeout, DefaultPutTimeout)
	if c.PutParallelism <= 0 {
		c.PutParallelism = DefaultPutParallelism
	}
	if c.RenewDeadline >= c.LeaseDuration {
		return fmt.Errorf("warm-pool driver: RenewDeadline %v must be below LeaseDuration %v", c.RenewDeadline, c.LeaseDuration)
	}
	if c.LeaseNamespace == "" {
		c.LeaseNamespace = DefaultLeaseNamespace()
	}
	if c.Identity == "" {
		host, err := os.Hostname()
		if err != nil {
			return fmt.Errorf("warm-pool driver: hostname for the lease identity: %w", err)
		}
		c.Identity = host + "_" + string(uuid.NewUUID())
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Observer == nil {
		c.Observer = unobserved{}
	}
	return nil
}

func setDefault(d *time.Duration, def time.Duration) {
	if *d == 0 {
		*d = def
	}
}

// Driver runs the warm-pool reconcile loop under leader election and
// rebuilds it whenever it stops before its context ends.
type Driver struct {
	cfg    Config
	log    *slog.Logger
	scheme *runtime.Scheme

	next    manager.Manager // built and not yet started
	leading atomic.Bool
	builds  atomic.Int64
	puts    atomic.Int64
}

// New validates cfg and builds the first manager, so that a driver that
// cannot be built fails the caller at startup.
func New(cfg Config) (*Driver, error) {
	if err := cfg.defaults(); err != nil {
		return nil, err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("warm-pool driver: scheme: %w", err)
	}
	if err := extv1beta1.AddToScheme(scheme); err != nil {
		return nil, fmt.Errorf("warm-pool driver: scheme: %w", err)
	}
	d := &Driver{cfg: cfg, log: cfg.Logger.With("component", "warm-pool-driver"), scheme: scheme}
	if cfg.Token == "" {
		return d, nil
	}
	mgr, err := d.build()
	if err != nil {
		return nil, err
	}
	d.next = mgr
	return d, nil
}

// Identity is this replica's holder identity in the Lease.
func (d *Driver) Identity() string { return d.cfg.Identity }

// Leading reports whether this replica currently drives the pools.
func (d *Driver) Leading() bool { return d.leading.Load() }

// drives records that this replica started (true) or stopped driving the
// pools, and tells the Observer.
func (d *Driver) drives(on bool) {
	d.leading.Store(on)
	d.cfg.Observer.ObserveLeading(on)
}

// Puts is how many PUT /v1/pools this driver has sent, over every rebuild.
func (d *Driver) Puts() int64 { return d.puts.Load() }

// Run drives until ctx ends. A manager that stops early (most often a lost
// lease) is replaced after RebuildDelay and enters the election again. A
// token-less driver logs once and waits for ctx without taking part in
// the election, so that a replica with a token can drive.
func (d *Driver) Run(ctx context.Context) error {
	if d.cfg.Token == "" {
		d.log.Info("no sandboxd token configured: the warm-pool driver sets no pools (fail-closed) and stays out of the election")
		<-ctx.Done()
		return nil
	}
	for {
		mgr := d.next
		d.next = nil
		if mgr == nil {
			var err error
			if mgr, err = d.build(); err != nil {
				d.log.Error("rebuilding the warm-pool driver", "err", err, "retryIn", d.cfg.RebuildDelay)
			}
		}
		if mgr != nil {
			err := mgr.Start(ctx)
			if ctx.Err() != nil {
				return nil
			}
			d.log.Error("the warm-pool driver stopped; rebuilding it", "err", err, "in", d.cfg.RebuildDelay)
		}
		t := d.cfg.Clock.NewTimer(d.cfg.RebuildDelay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		}
	}
}

// build makes a fresh manager: its own Lease lock, cache, client and
// event recorder, and a reconciler with no memory of earlier rounds (its
// first pass PUTs every node).
func (d *Driver) build() (manager.Manager, error) {
	cfg := d.cfg
	lock, err := d.leaseLock()
	if err != nil {
		return nil, err
	}
	ld, rd, rp := cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod
	mgr, err := manager.New(cfg.RESTConfig, manager.Options{
		Scheme: d.scheme,
		Logger: logr.FromSlogHandler(d.log.Handler()),
		// The aggregated apiserver owns the serving port; the driver
		// serves nothing.
		Metrics:                             metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:              "0",
		LeaderElection:                      true,
		LeaderElectionID:                    LeaseName,
		LeaderElectionNamespace:             cfg.LeaseNamespace,
		LeaderElectionResourceLockInterface: lock,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &ld,
		RenewDeadline:                       &rd,
		RetryPeriod:                         &rp,
	})
	if err != nil {
		return nil, fmt.Errorf("warm-pool driver: building the manager: %w", err)
	}
	rec := &reconciler{
		client:  mgr.GetClient(),
		cache:   mgr.GetCache(),
		nodes:   cfg.Nodes,
		push:    newPusher(cfg.Token, cfg.PutTimeout, cfg.PutParallelism, d.log),
		events:  newEventLog(mgr.GetEventRecorder("warm-pool-driver")),
		log:     d.log,
		clock:   cfg.Clock,
		sync:    cfg.SyncInterval,
		poll:    cfg.NodePollInterval,
		observe: cfg.Observer,
	}
	rec.push.onPut = func() { d.puts.Add(1) }
	rec.push.observe = cfg.Observer
	rec.leading = d.drives
	if err := mgr.Add(rec); err != nil {
		return nil, fmt.Errorf("warm-pool driver: adding the reconciler: %w", err)
	}
	d.builds.Add(1)
	return mgr, nil
}

// leaseLock is the Lease lock with this replica's identity (which
// controller-runtime would otherwise invent).
func (d *Driver) leaseLock() (resourcelock.Interface, error) {
	rc := rest.CopyConfig(d.cfg.RESTConfig)
	rc = rest.AddUserAgent(rc, "warm-pool-driver-leader-election")
	// A hung request must not outlive the renew deadline.
	rc.Timeout = max(d.cfg.RenewDeadline/2, time.Second)
	core, err := corev1client.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("warm-pool driver: lease client: %w", err)
	}
	coord, err := coordinationv1client.NewForConfig(rc)
	if err != nil {
		return nil, fmt.Errorf("warm-pool driver: lease client: %w", err)
	}
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, d.cfg.LeaseNamespace, LeaseName,
		core, coord, resourcelock.ResourceLockConfig{Identity: d.cfg.Identity})
	if err != nil {
		return nil, fmt.Errorf("warm-pool driver: lease lock: %w", err)
	}
	return lock, nil
}
