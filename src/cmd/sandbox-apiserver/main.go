// Command sandbox-apiserver serves sandboxes.agents.x-k8s.io/v1beta1 as a
// storeless Kubernetes aggregated apiserver: sandboxes are read from the
// NodeInventory objects the nodes publish and claimed from, released on and
// driven on the nodes' sandboxd. There is no etcd and no per-sandbox object.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	utilfeature "k8s.io/apiserver/pkg/util/feature"

	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/backend"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/server"
	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/internal/kubeclient"
	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/namehold"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/warmpool"
)

const usageHeader = `sandbox-apiserver serves sandboxes.agents.x-k8s.io/v1beta1 as an aggregated
apiserver. It stores nothing: sandboxes are read from the NodeInventory objects
the nodes publish and claimed from the nodes' warm pools on create. There is
deliberately no etcd option.

Environment: OPERATOR_LOG_LEVEL = debug, info (default), warn or error.

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line of the binary.
type options struct {
	recommended *genericoptions.RecommendedOptions
	token       sandboxd.TokenOptions
	inventory   *inventory.Options

	enableWarmPoolDriver bool
	warmPoolSyncInterval time.Duration

	nameHoldTTL   time.Duration
	nodeTimeout   time.Duration
	shutdownDelay time.Duration
	peers         peerOptions

	enableE2B bool
	e2b       *e2b.Options
	// e2bConfig is the validated surface configuration, set by validate
	// when enableE2B.
	e2bConfig e2b.Config
}

func newOptions() *options {
	return &options{
		recommended:          server.NewRecommendedOptions(),
		inventory:            inventory.NewOptions(),
		enableWarmPoolDriver: true,
		nameHoldTTL:          namehold.DefaultTTL,
		nodeTimeout:          backend.DefaultNodeTimeout,
		e2b:                  e2b.NewOptions(),
	}
}

func (o *options) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("sandbox-apiserver", pflag.ContinueOnError)
	o.recommended.AddFlags(fs)
	o.token.AddFlags(fs)
	inventory.AddFlags(fs, o.inventory)
	fs.BoolVar(&o.enableWarmPoolDriver, "enable-warm-pool-driver", o.enableWarmPoolDriver,
		"Run the in-process SandboxWarmPool → sandboxd pool reconcile loop (control-plane warm-capacity surface; pool-level, never per-sandbox).")
	fs.DurationVar(&o.warmPoolSyncInterval, "warm-pool-sync-interval", o.warmPoolSyncInterval,
		"Resync cadence for the SandboxWarmPool driver, and with it the sampling period of the warm count in pool status (0 means 5s).")
	fs.DurationVar(&o.nameHoldTTL, "name-hold-ttl", o.nameHoldTTL,
		"How long a replica's hold on a Sandbox name outlives its last renewal (docs/sandbox-apiserver.md, \"One name, one sandbox across replicas\"): a replica that dies mid-create blocks its names this long. Keep it above the nodes' publish interval (vk-sandbox's --publish-interval, 30s by default), or a create its replica claimed just before dying can be claimed again under the same name before the node publishes it.")
	fs.DurationVar(&o.nodeTimeout, "node-timeout", o.nodeTimeout,
		"Bound on each call to one sandboxd node (a claim, a lifecycle verb, a relay handshake), within the request's own deadline. A node whose claim gets no answer within it is tried after every other candidate until it answers again, so a node this replica cannot reach, while its NodeInventory stays fresh, costs one create this wait, not every create that draws it.")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", o.shutdownDelay,
		"On SIGTERM, report not ready (/readyz) and keep serving this long before the listeners stop accepting and drain their requests, so a Service stops routing to the pod first; set it above the time endpoint removal takes to reach every node (the chart sets 5s). Zero stops at once.")
	fs.BoolVar(&o.enableE2B, "enable-e2b-api", o.enableE2B,
		"Serve the e2b-compatible REST surface, so an unmodified e2b SDK can claim from the same warm pools (point E2B_API_URL at it).")
	o.e2b.AddFlags(fs)
	o.peers.addFlags(fs)
	// The generic apiserver's gates, e.g. CBORServingAndStorage, which
	// makes the server answer application/cbor (docs/performance.md).
	utilfeature.DefaultMutableFeatureGate.AddFlag(fs)
	return fs
}

func (o *options) validate() error {
	if err := o.inventory.Validate(); err != nil {
		return err
	}
	if o.warmPoolSyncInterval < 0 {
		return fmt.Errorf("--warm-pool-sync-interval must not be negative, got %v", o.warmPoolSyncInterval)
	}
	if o.nameHoldTTL < 3*time.Second {
		return fmt.Errorf("--name-hold-ttl must be at least 3s (holds are renewed every third of it), got %v", o.nameHoldTTL)
	}
	if o.shutdownDelay < 0 {
		return fmt.Errorf("--shutdown-delay must not be negative, got %v", o.shutdownDelay)
	}
	if o.nodeTimeout <= 0 {
		return fmt.Errorf("--node-timeout must be positive, got %v", o.nodeTimeout)
	}
	if err := o.peers.validate(); err != nil {
		return err
	}
	if o.enableE2B {
		cfg, err := o.e2b.Config()
		if err != nil {
			return err
		}
		o.e2bConfig = cfg
	}
	return nil
}

func run(args []string, stdout, stderr io.Writer) int {
	logger, err := logging.FromEnv(stderr, os.Getenv(logging.LevelEnv))
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-apiserver: %v\n", err)
		return serve.ExitUsage
	}

	o := newOptions()
	if exit, ok := serve.ParseCommandLine(o.flagSet(), usageHeader, args, stdout, stderr); !ok {
		return exit
	}
	if err := o.validate(); err != nil {
		return serve.UsageError(stderr, "sandbox-apiserver", err)
	}
	serve.LimitMemory(logger, "")
	if err := runServer(serve.NewDrain(serve.SignalContext(), o.shutdownDelay, logger), logger, o); err != nil {
		logger.Error("sandbox-apiserver stopped", "err", err)
		return serve.ExitFailure
	}
	return 0
}

// runServer wires the fleet backend and runs the server, the NodeInventory
// informer, the warm-pool driver and the e2b surface until ctx ends.
func runServer(drain *serve.Drain, logger *slog.Logger, o *options) error {
	ctx := drain.Context()
	// Outside a cluster, KUBECONFIG names the cluster as it does for kubectl;
	// --kubeconfig wins when both are given.
	if o.recommended.CoreAPI != nil && o.recommended.CoreAPI.CoreAPIKubeconfigPath == "" {
		o.recommended.CoreAPI.CoreAPIKubeconfigPath = os.Getenv(clientcmd.RecommendedConfigPathEnvVar)
	}
	kubeconfig := ""
	if o.recommended.CoreAPI != nil {
		kubeconfig = o.recommended.CoreAPI.CoreAPIKubeconfigPath
	}
	restConfig, err := kubeclient.RESTConfig(kubeconfig)
	if err != nil {
		return err
	}
	token, err := o.token.Load()
	if err != nil {
		return err
	}
	if token == "" {
		logger.Warn("no sandboxd token configured: node-local calls carry none, so nodes with an api_token refuse them and lifecycle verbs fail")
	}
	fleet, err := newFleet(restConfig, o, token, logger)
	if err != nil {
		return err
	}
	// A socket handed over at start (systemd socket activation, or a test
	// harness that bound it) serves the API in place of a bind of our own.
	ss := o.recommended.SecureServing
	if ln, name := serve.ClaimInheritedListener(net.JoinHostPort(ss.BindAddress.String(), strconv.Itoa(ss.BindPort))); ln != nil {
		ss.Listener = ln
		logger.Info("serving the API on an inherited socket", "address", ln.Addr().String(), "name", name)
	}
	cfg, err := server.NewConfig(o.recommended, fleet.backend)
	if err != nil {
		return err
	}
	cfg.ReadyChecks = append(cfg.ReadyChecks, healthz.NamedCheck("inventory-synced", func(*http.Request) error {
		if !fleet.store.HasSynced() {
			return errors.New("the NodeInventory informer has not synced yet")
		}
		return nil
	}))
	cfg.ReadyChecks = append(cfg.ReadyChecks, healthz.NamedCheck("not-draining", func(*http.Request) error {
		if drain.Draining() {
			return errors.New("shutting down: serving on until the Service stops routing here")
		}
		return nil
	}))
	var servePeers func(context.Context) error
	if p := fleet.peers; p != nil {
		if servePeers, err = p.listen(&o.peers, fleet.service.ApplyPeerWrites, logger); err != nil {
			return err
		}
		if p.discovery != nil {
			// A replica that does not know its peers yet would answer
			// writes the others never hear of.
			cfg.ReadyChecks = append(cfg.ReadyChecks, healthz.NamedCheck("peers-synced", func(*http.Request) error {
				if !p.discovery.HasSynced() {
					return errors.New("the replicas' EndpointSlices have not been listed yet")
				}
				return nil
			}))
		}
	}
	srv, err := cfg.New()
	if err != nil {
		return err
	}
	driver, err := newWarmPoolDriver(logger, o, restConfig, fleet.store, token)
	if err != nil {
		return err
	}
	e2bSurface, err := listenE2B(logger, o, fleet, token, drain)
	if err != nil {
		return err
	}

	g := serve.NewGroup(ctx, logger)
	g.Informers("NodeInventory", fleet.informers, fleet.store.HasSynced)
	g.Loop(fleet.store.Run)
	g.Loop(fleet.service.Run)
	g.Loop(fleet.names.Run)
	if driver != nil {
		g.Go("warm-pool driver", driver.Run)
	}
	if e2bSurface != nil {
		g.Go("e2b surface", e2bSurface)
	}
	if servePeers != nil {
		g.Go("peer writes", servePeers)
		g.Loop(fleet.peers.sharer.Run)
		if fleet.peers.discovery != nil {
			g.Loop(fleet.peers.discovery.Run)
		}
	}
	logger.Info("serving", "securePort", o.recommended.SecureServing.BindPort, "inventoryStaleAfter", o.inventory.StaleAfter)
	g.Go("apiserver", srv.PrepareRun().RunWithContext)
	return g.Wait()
}

// fleet is the backend and what keeps it current: the NodeInventory
// informer, the inventory store over it, the sandboxes service, and the
// name holds that keep one name one sandbox across replicas.
type fleet struct {
	informers *inventory.Informer
	store     *inventory.Store
	names     *namehold.Holds
	peers     *peerSharing
	service   *backend.Service
	backend   registry.Backend
}

func newFleet(restConfig *rest.Config, o *options, token string, logger *slog.Logger) (*fleet, error) {
	informer, err := inventory.NewInformer(restConfig)
	if err != nil {
		return nil, err
	}
	store, err := inventory.New(inventory.Config{Source: informer.SharedIndexInformer(), StaleAfter: o.inventory.StaleAfter, Logger: logger.With("component", "inventory")})
	if err != nil {
		return nil, fmt.Errorf("building the inventory store: %w", err)
	}
	// The holds' writer keeps at most one write per shard in flight and
	// folds everything queued meanwhile into the next, so it bounds its own
	// rate; client-go's default 5 requests a second would instead queue
	// every create behind a token bucket.
	holdsConfig := rest.CopyConfig(restConfig)
	holdsConfig.QPS = -1
	kube, err := kubernetes.NewForConfig(holdsConfig)
	if err != nil {
		return nil, fmt.Errorf("building the Kubernetes client for name holds: %w", err)
	}
	// The holds live beside the warm-pool driver's Lease, in the pod's
	// namespace, where the chart grants the replicas their ConfigMaps.
	names, err := namehold.New(namehold.Config{
		ConfigMaps: kube.CoreV1(), Namespace: warmpool.DefaultLeaseNamespace(), TTL: o.nameHoldTTL,
		Logger:   logger.With("component", "namehold"),
		Observer: metrics.NewNameHolds(legacyregistry.Registerer()),
	})
	if err != nil {
		return nil, fmt.Errorf("building the name holds: %w", err)
	}
	peers, err := newPeerSharing(&o.peers, token, kube, logger)
	if err != nil {
		return nil, err
	}
	svcConfig := backend.Config{
		Inventory: store, Token: token, Names: names, NodeTimeout: o.nodeTimeout, Logger: logger,
		// The generic apiserver serves its registry at /metrics (behind
		// its authentication and authorization): the claims join it.
		ClaimObserver:     metrics.NewClaims(legacyregistry.Registerer()),
		OperationObserver: metrics.NewLifecycle(legacyregistry.Registerer()),
	}
	if peers != nil {
		svcConfig.Peers = peers.sharer
	}
	service, err := backend.New(svcConfig)
	if err != nil {
		return nil, fmt.Errorf("building the sandboxes service: %w", err)
	}
	metrics.RegisterFleetView(legacyregistry.Registerer(), inventoryFleetView(store, service.Fleet()), nil)
	return &fleet{informers: informer, store: store, names: names, peers: peers, service: service, backend: service}, nil
}

// newWarmPoolDriver builds the driver, nil when it is disabled; a driver
// that cannot be built stops the process, while one that stops later is
// rebuilt by warmpool.Driver.Run itself.
func newWarmPoolDriver(logger *slog.Logger, o *options, restConfig *rest.Config, nodes warmpool.NodeLister, token string) (*warmpool.Driver, error) {
	if !o.enableWarmPoolDriver {
		logger.Info("the warm-pool driver is disabled (--enable-warm-pool-driver=false)")
		return nil, nil
	}
	d, err := warmpool.New(warmpool.Config{
		RESTConfig:   restConfig,
		Nodes:        nodes,
		Token:        token,
		SyncInterval: o.warmPoolSyncInterval,
		Logger:       logger,
		Observer:     metrics.NewWarmPool(legacyregistry.Registerer()),
	})
	if err != nil {
		return nil, fmt.Errorf("building the warm-pool driver: %w", err)
	}
	logger.Info("warm-pool driver enabled", "lease", warmpool.LeaseName, "identity", d.Identity())
	return d, nil
}
