// Command sandbox-envd-proxy is the e2b data plane: it places each request
// on a sandbox from the NodeInventory informer, authorizes it with the
// sandbox's envd access token and relays it into the owning node's
// guest-port endpoint. See docs/envd-proxy.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy/inventorylocator"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/internal/kubeclient"
	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

const usageHeader = `sandbox-envd-proxy carries the e2b SDK's data plane (files, commands, pty and
any other guest port) from {port}-{sandboxID}.{domain}, or the E2b-Sandbox-Id
and E2b-Sandbox-Port headers, to the owning node's guest-port relay. GET
/healthz is unauthenticated, for probes.

Environment: OPERATOR_LOG_LEVEL = debug, info (default), warn or error;
KUBECONFIG when --kubeconfig is not given and the process runs outside a
cluster.

Flags:
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// options are the command line of the binary.
type options struct {
	bindAddress string
	domain      string
	namespace   string
	tlsCertFile string
	tlsKeyFile  string
	guestHTTP2  bool
	secretFile  string
	kubeconfig  string
	metricsAddr string
	// shutdownDelay is how long the proxy serves on, not ready, after
	// SIGTERM.
	shutdownDelay time.Duration
	token         sandboxd.TokenOptions
	inventory     *inventory.Options
	limits        envdproxy.Limits
}

func newOptions() *options {
	return &options{bindAddress: ":8443", namespace: "default", inventory: inventory.NewOptions(), limits: envdproxy.DefaultLimits()}
}

func (o *options) flagSet() *pflag.FlagSet {
	fs := pflag.NewFlagSet("sandbox-envd-proxy", pflag.ContinueOnError)
	fs.StringVar(&o.bindAddress, "bind-address", o.bindAddress, "Address the proxy listens on.")
	fs.StringVar(&o.domain, "domain", o.domain,
		"Base domain sandbox hosts are derived from, as {port}-{sandboxID}.{domain}. Must match the apiserver's --e2b-domain. Required.")
	fs.StringVar(&o.namespace, "namespace", o.namespace,
		"Namespace inventory lookups are filtered to; empty matches every namespace. Not an access boundary: a caller holding a sandbox's token reaches it in any namespace.")
	fs.StringVar(&o.tlsCertFile, "tls-cert-file", o.tlsCertFile,
		"Wildcard certificate for *.{domain}. Omit to serve cleartext (HTTP/1.1 and h2c) behind an edge that terminates TLS.")
	fs.StringVar(&o.tlsKeyFile, "tls-private-key-file", o.tlsKeyFile, "Private key for --tls-cert-file; the two are set together.")
	fs.BoolVar(&o.guestHTTP2, "guest-http2", o.guestHTTP2,
		"Forward to the guest over cleartext HTTP/2. Off by default: envd 0.8.0 installs no h2c handler and refuses it. Clients still reach this proxy over HTTP/2.")
	fs.StringVar(&o.secretFile, "e2b-envd-secret-file", o.secretFile,
		"The e2b surface's envd secret file; access tokens are verified against it. Required.")
	fs.StringVar(&o.kubeconfig, "kubeconfig", o.kubeconfig,
		"Kubeconfig of the cluster whose NodeInventory objects are read; default $KUBECONFIG, then the in-cluster service account.")
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", o.metricsAddr,
		"Address of a separate listener serving the data plane's metrics (sandbox_operator_dataplane_*: requests by status, bytes each way, relay dials, open relays) and the process's Go and process metrics (go_goroutines, process_open_fds) at /metrics for Prometheus, without authentication; empty (the default) serves none.")
	fs.DurationVar(&o.shutdownDelay, "shutdown-delay", o.shutdownDelay,
		"On SIGTERM, answer /healthz 503 and keep proxying this long before the listener stops accepting and drains its requests, so a Service stops routing to the pod first (the chart sets 5s). Zero stops at once.")
	o.limits.AddFlags(fs, "")
	o.token.AddFlags(fs)
	inventory.AddFlags(fs, o.inventory)
	return fs
}

// validate checks the flags that need no file read.
func (o *options) validate() error {
	if o.bindAddress == "" {
		return errors.New("--bind-address must not be empty")
	}
	if o.shutdownDelay < 0 {
		return fmt.Errorf("--shutdown-delay must not be negative, got %v", o.shutdownDelay)
	}
	if o.domain == "" {
		return errors.New("--domain is required (the apiserver's --e2b-domain)")
	}
	if _, err := envdproxy.NormalizeDomain(o.domain); err != nil {
		return fmt.Errorf("--domain %q: must be a bare DNS name such as sandbox.example.com", o.domain)
	}
	if o.secretFile == "" {
		return errors.New("--e2b-envd-secret-file is required")
	}
	if (o.tlsCertFile == "") != (o.tlsKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file must be set together")
	}
	if o.token.Token == "" && o.token.File == "" {
		return errors.New("--sandboxd-token or --sandboxd-token-file is required: the proxy reads claim tokens with the fleet's root api_token")
	}
	if err := o.limits.Validate(""); err != nil {
		return err
	}
	return o.inventory.Validate()
}

// credentials are what the proxy reads from files at startup.
type credentials struct {
	secret []byte
	token  string
	certs  *serve.CertFiles
}

func (o *options) loadCredentials() (*credentials, error) {
	secret, err := envdtoken.ReadSecretFile(o.secretFile)
	if err != nil {
		return nil, fmt.Errorf("--e2b-envd-secret-file: %w", err)
	}
	token, err := o.token.Load()
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, errors.New("--sandboxd-token is empty")
	}
	c := &credentials{secret: secret, token: token}
	if o.tlsCertFile != "" {
		if c.certs, err = serve.LoadCertFiles(o.tlsCertFile, o.tlsKeyFile); err != nil {
			return nil, fmt.Errorf("--tls-cert-file and --tls-private-key-file: %w", err)
		}
	}
	return c, nil
}

func run(args []string, stdout, stderr io.Writer) int {
	logger, err := logging.FromEnv(stderr, os.Getenv(logging.LevelEnv))
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-envd-proxy: %v\n", err)
		return serve.ExitUsage
	}

	o := newOptions()
	if exit, ok := serve.ParseCommandLine(o.flagSet(), usageHeader, args, stdout, stderr); !ok {
		return exit
	}
	if err := o.validate(); err != nil {
		return serve.UsageError(stderr, "sandbox-envd-proxy", err)
	}
	creds, err := o.loadCredentials()
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-envd-proxy: %v\n", err)
		return serve.ExitUsage
	}
	restConfig, err := kubeclient.RESTConfig(o.kubeconfig)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-envd-proxy: %v\n", err)
		return serve.ExitUsage
	}
	informer, err := inventory.NewInformer(restConfig)
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-envd-proxy: %v\n", err)
		return serve.ExitUsage
	}

	serve.LimitMemory(logger, "")
	drain := serve.NewDrain(serve.SignalContext(), o.shutdownDelay, logger)
	p, err := listen(logger, o, creds, informer, drain)
	if err != nil {
		logger.Error("sandbox-envd-proxy cannot start", "err", err)
		return serve.ExitFailure
	}
	if err := p.run(drain.Context(), logger); err != nil {
		logger.Error("sandbox-envd-proxy stopped", "err", err)
		return serve.ExitFailure
	}
	return 0
}

// proxyServer is the proxy, bound to its listener, and the NodeInventory
// informer and store it places requests with.
type proxyServer struct {
	informer *inventory.Informer
	store    *inventory.Store
	srv      *serve.Server
	metrics  *serve.Server    // nil without --metrics-bind-address
	certs    *serve.CertFiles // nil without TLS
}

// listen builds the store over informer and the proxy, and binds the
// listener.
func listen(logger *slog.Logger, o *options, creds *credentials, informer *inventory.Informer, drain *serve.Drain) (*proxyServer, error) {
	store, err := inventory.New(inventory.Config{Source: informer.SharedIndexInformer(), StaleAfter: o.inventory.StaleAfter, Logger: logger.With("component", "inventory")})
	if err != nil {
		return nil, fmt.Errorf("building the inventory store: %w", err)
	}
	// One registry for the process: what --metrics-bind-address serves.
	// Without that listener the data plane's counts are kept but never
	// read, which costs a few atomic adds per relay.
	registry := metrics.NewRegistry()
	pcfg := envdproxy.Config{
		Locator:    inventorylocator.New(store, o.namespace),
		Domain:     o.domain,
		Secret:     creds.secret,
		Token:      creds.token,
		GuestHTTP2: o.guestHTTP2,
		Logger:     logger,
		Observer:   metrics.NewDataPlane(registry),
		// Until the informer has listed every node, a published sandbox
		// would look unknown: report not ready rather than 502 it. Once
		// draining, not ready either, so the Service stops routing here
		// while the proxy still serves what reaches it.
		Ready: func() bool { return store.HasSynced() && !drain.Draining() },
	}
	o.limits.Apply(&pcfg)
	proxy, err := envdproxy.New(pcfg)
	if err != nil {
		return nil, err
	}
	// HTTP/1.1 and HTTP/2, over TLS when certs are given and in the clear
	// (h2c) otherwise; guest apps may send large cookies.
	cfg := serve.ServerConfig{Name: "envd proxy", Addr: o.bindAddress, Handler: proxy, Protocols: envdproxy.Protocols(),
		ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 1 << 20, Logger: logger}
	o.limits.ApplyServer(&cfg)
	if creds.certs != nil {
		cfg.TLS = creds.certs.TLSConfig()
	}
	srv, err := serve.Listen(cfg)
	if err != nil {
		return nil, fmt.Errorf("--bind-address: %w", err)
	}
	var metricsSrv *serve.Server
	if o.metricsAddr != "" {
		if metricsSrv, err = serve.ListenMetrics(o.metricsAddr, registry, logger); err != nil {
			_ = srv.Close()
			return nil, fmt.Errorf("--metrics-bind-address: %w", err)
		}
	}
	logger.Info("routing", "domain", o.domain, "namespace", o.namespace, "guestHTTP2", o.guestHTTP2, "inventoryStaleAfter", o.inventory.StaleAfter)
	return &proxyServer{informer: informer, store: store, srv: srv, metrics: metricsSrv, certs: creds.certs}, nil
}

// run serves until ctx ends, then drains in-flight requests.
func (p *proxyServer) run(ctx context.Context, logger *slog.Logger) error {
	g := serve.NewGroup(ctx, logger)
	g.Informers("NodeInventory", p.informer, p.store.HasSynced)
	g.Loop(p.store.Run)
	g.Go("envd proxy", p.srv.Serve)
	if p.certs != nil {
		g.Go("certificate watcher", p.certs.Run)
	}
	if p.metrics != nil {
		g.Go("metrics", p.metrics.Serve)
	}
	return g.Wait()
}
