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
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"k8s.io/apiserver/pkg/server/healthz"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	sandboxv1beta1 "github.com/cocoonstack/sandbox-operator/src/apis/sandbox/v1beta1"
	registry "github.com/cocoonstack/sandbox-operator/src/apiserver/registry/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/server"
	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/kubeclient"
	"github.com/cocoonstack/sandbox-operator/src/sandboxes"
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
	os.Exit(run(os.Args[1:], os.Stderr))
}

// options are the command line of the binary.
type options struct {
	recommended *genericoptions.RecommendedOptions
	token       sandboxes.TokenOptions
	inventory   *inventory.Options

	enableWarmPoolDriver bool
	warmPoolSyncInterval time.Duration

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
	fs.BoolVar(&o.enableE2B, "enable-e2b-api", o.enableE2B,
		"Serve the e2b-compatible REST surface, so an unmodified e2b SDK can claim from the same warm pools (point E2B_API_URL at it).")
	o.e2b.AddFlags(fs)
	return fs
}

func (o *options) validate() error {
	if err := o.inventory.Validate(); err != nil {
		return err
	}
	if o.warmPoolSyncInterval < 0 {
		return fmt.Errorf("--warm-pool-sync-interval must not be negative, got %v", o.warmPoolSyncInterval)
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

func run(args []string, stderr io.Writer) int {
	logger, err := kubeclient.ProcessLogger(stderr)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-apiserver: %v\n", err)
		return 2
	}

	o := newOptions()
	fs := o.flagSet()
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(stderr, usageHeader)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := o.validate(); err != nil {
		fmt.Fprintf(stderr, "sandbox-apiserver: %v\n", err)
		return 2
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := serve(ctx, logger, o); err != nil {
		logger.Error("sandbox-apiserver stopped", "err", err)
		return 1
	}
	return 0
}

// serve wires the fleet backend and runs the server until ctx ends.
func serve(ctx context.Context, logger *slog.Logger, o *options) error {
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
	fleet, err := newFleet(restConfig, o.inventory.StaleAfter, token)
	if err != nil {
		return err
	}
	cfg, err := server.NewConfig(o.recommended, fleet.backend)
	if err != nil {
		return err
	}
	cfg.ReadyChecks = append(cfg.ReadyChecks, healthz.NamedCheck("inventory-synced", func(*http.Request) error {
		if !fleet.synced() {
			return errors.New("the NodeInventory informer has not synced yet")
		}
		return nil
	}))
	srv, err := cfg.New()
	if err != nil {
		return err
	}

	driver, err := newWarmPoolDriver(logger, o, restConfig, fleet.store, token)
	if err != nil {
		return err
	}

	e2bSurface, err := newE2BSurface(logger, o, fleet, token)
	if err != nil {
		return err
	}

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := fleet.start(runCtx)
	driverDone := driver.start(runCtx)
	defer func() { cancel(); <-driverDone }()
	e2bDone, err := e2bSurface.start(runCtx, cancel)
	if err != nil {
		cancel()
		<-done
		return err
	}
	logger.Info("serving", "securePort", o.recommended.SecureServing.BindPort, "inventoryStaleAfter", o.inventory.StaleAfter)
	err = srv.PrepareRun().RunWithContext(runCtx)
	cancel()
	e2bErr := <-e2bDone
	<-done
	if err != nil {
		return fmt.Errorf("running the apiserver: %w", err)
	}
	return e2bErr
}

// fleet is the backend and what keeps it current: the NodeInventory
// informer, the inventory store over it, and the sandboxes service.
type fleet struct {
	informers dynamicinformer.DynamicSharedInformerFactory
	store     *inventory.Store
	service   *sandboxes.Service
	backend   registry.Backend
}

func newFleet(restConfig *rest.Config, staleAfter time.Duration, token string) (*fleet, error) {
	dyn, err := dynamic.NewForConfig(restConfig)
	if err != nil {
		return nil, fmt.Errorf("building the dynamic client: %w", err)
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	informer := factory.ForResource(sandboxv1beta1.NodeInventoryGVR).Informer()
	store, err := inventory.New(inventory.Config{Source: informer, StaleAfter: staleAfter})
	if err != nil {
		return nil, fmt.Errorf("building the inventory store: %w", err)
	}
	service, err := sandboxes.New(sandboxes.Config{Inventory: store, Token: token})
	if err != nil {
		return nil, fmt.Errorf("building the sandboxes service: %w", err)
	}
	return &fleet{informers: factory, store: store, service: service, backend: service}, nil
}

func (f *fleet) synced() bool { return f.store.HasSynced() }

// start runs the informer, store and service until ctx ends; the returned
// channel closes once all of them have stopped.
func (f *fleet) start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	f.informers.Start(ctx.Done())
	go func() {
		defer close(done)
		storeDone := make(chan struct{})
		go func() { defer close(storeDone); f.store.Run(ctx) }()
		f.service.Run(ctx)
		<-storeDone
		f.informers.Shutdown()
	}()
	return done
}

// warmPoolDriver is the optional in-process SandboxWarmPool driver.
type warmPoolDriver struct{ d *warmpool.Driver }

// newWarmPoolDriver builds the driver when it is enabled; a driver that
// cannot be built stops the process, while one that stops later is
// rebuilt by warmpool.Driver.Run itself.
func newWarmPoolDriver(logger *slog.Logger, o *options, restConfig *rest.Config, nodes warmpool.NodeLister, token string) (*warmPoolDriver, error) {
	if !o.enableWarmPoolDriver {
		logger.Info("the warm-pool driver is disabled (--enable-warm-pool-driver=false)")
		return &warmPoolDriver{}, nil
	}
	// controller-runtime logs through the process logger, like klog.
	log := logr.FromSlogHandler(logger.Handler())
	ctrllog.SetLogger(log)
	d, err := warmpool.New(warmpool.Config{
		RESTConfig:   restConfig,
		Nodes:        nodes,
		Token:        token,
		SyncInterval: o.warmPoolSyncInterval,
		Logger:       log,
	})
	if err != nil {
		return nil, fmt.Errorf("building the warm-pool driver: %w", err)
	}
	logger.Info("warm-pool driver enabled", "lease", warmpool.LeaseName, "identity", d.Identity())
	return &warmPoolDriver{d: d}, nil
}

// start runs the driver until ctx ends; the channel closes when it returned.
func (w *warmPoolDriver) start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if w.d == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		_ = w.d.Run(ctx)
	}()
	return done
}
