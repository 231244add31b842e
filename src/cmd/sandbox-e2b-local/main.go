// Command sandbox-e2b-local runs the whole e2b-compatible system on one
// machine with nothing else installed — a simulated sandboxd mesh, a warm
// pool behind the SDK's default template, the e2b surface and its data
// plane — and prints the environment the e2b SDK needs.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b/app"
	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const (
	// namespace is where every local sandbox lands.
	namespace = "default"
	// anonymousKey is what E2B_API_KEY holds with --anonymous: the SDK
	// refuses to run without some key, and an anonymous surface without a
	// key file accepts any.
	anonymousKey = "e2b_anonymous_local"
	// warmTimeout bounds waiting for the pools to fill before "# ready".
	warmTimeout = 2 * time.Minute
)

func main() {
	isolate.Init() // a re-executed sandbox init runs here and never returns
	os.Exit(run(serve.SignalContext(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o := &options{}
	if exit, ok := serve.ParseCommandLine(newFlagSet(o), usageHeader, args, stdout, stderr); !ok {
		return exit
	}
	if err := o.validate(); err != nil {
		return serve.UsageError(stderr, "sandbox-e2b-local", err)
	}
	// One writer lock keeps request lines and log records whole.
	var mu sync.Mutex
	errOut := &lockedWriter{w: stderr, mu: &mu}
	logger, err := logging.FromEnv(errOut, os.Getenv(logging.LevelEnv))
	if err != nil {
		fmt.Fprintf(stderr, "sandbox-e2b-local: %v\n", err)
		return serve.ExitUsage
	}
	if !isLoopback(o.host) {
		logger.Warn("serving beyond loopback: anyone with the API key can run commands on this host through the simulated envd guests", "host", o.host)
	}
	if err := runLocal(ctx, o, stdout, logger, requestLog(stderr, &mu)); err != nil {
		logger.Error("sandbox-e2b-local failed", "err", err)
		return serve.ExitFailure
	}
	return serve.ExitOK
}

// runLocal starts the simulated mesh and sandbox-e2b over it, prints the
// SDK environment and runs until ctx ends.
func runLocal(ctx context.Context, o *options, stdout io.Writer, logger *slog.Logger, wrap func(string, http.Handler) http.Handler) error {
	rootToken, err := randomHex(32)
	if err != nil {
		return err
	}
	secretHex, err := randomHex(32)
	if err != nil {
		return err
	}
	secret := []byte(secretHex)
	apiKey := anonymousKey
	if !o.anonymous {
		k, err := randomHex(20)
		if err != nil {
			return err
		}
		apiKey = "e2b_" + k
	}

	// The SDK's default create asks for internet access (the egress
	// lane); allowInternetAccess: false asks for the isolated one. Both
	// are pooled.
	pools := []sandboxd.PoolSpec{
		{Template: o.template, Net: "egress", Warm: o.warm},
		{Template: o.template, Net: sandbox.DefaultNet, Warm: o.warm},
	}
	aliases := map[string]e2b.Template{"base": {Image: o.template, Size: sandbox.DefaultSize}}
	// The code interpreter (@e2b/code-interpreter's default template) runs
	// a real IPython kernel, which needs an isolated machine and the
	// e2b-ci root filesystem layer: it is served only isolated.
	if o.codeInterpreterWarm > 0 && !o.unisolated {
		pools = append(pools,
			sandboxd.PoolSpec{Template: e2b.CodeInterpreterImage, Net: "egress", Warm: o.codeInterpreterWarm},
			sandboxd.PoolSpec{Template: e2b.CodeInterpreterImage, Net: sandbox.DefaultNet, Warm: o.codeInterpreterWarm})
		aliases[e2b.CodeInterpreterAlias] = e2b.Template{Image: e2b.CodeInterpreterImage, Size: sandbox.DefaultSize}
	}
	var isolation *simfleet.IsolationConfig
	if o.unisolated {
		logger.Warn("--unisolated: sandboxes are ordinary processes of this user on this host; their commands run here and nothing isolates them from the host or from each other")
	} else {
		if isolation, err = simfleet.NewIsolation("", fmt.Sprintf("sandbox-operator-e2b-local-%d", os.Getpid()), logger); err != nil {
			return fmt.Errorf("sandboxes cannot be isolated on this machine: %w; pass --unisolated to run them as processes of this user instead", err)
		}
		defer func() { _ = isolation.Close() }()
	}
	f, err := simfleet.Start(context.WithoutCancel(ctx), simfleet.Config{
		Isolation:          isolation,
		Nodes:              o.nodes,
		ListenHost:         "127.0.0.1",
		RootToken:          rootToken,
		Pools:              pools,
		EgressAttachment:   true,
		RefillDelay:        o.refillDelay,
		ColdProvisionDelay: o.coldDelay,
		MaxTTL:             sandboxd.MaxTTL,
		Envd:               &simfleet.EnvdConfig{Secret: secret},
		Volumes:            o.volumeCatalog,
		Logger:             logger.With("component", "sandboxd-sim"),
		Customize: func(i int, cfg *node.Config) {
			if i < o.coldNodes {
				cfg.Pools = nil // no warm VMs here: claims entering are redirected
			}
		},
	})
	if err != nil {
		return fmt.Errorf("simulated mesh: %w", err)
	}
	defer func() {
		if err := f.Close(); err != nil {
			logger.Warn("stopping the simulated mesh", "err", err)
		}
	}()
	wctx, cancel := context.WithTimeout(ctx, warmTimeout)
	for i, n := range f.Nodes() {
		if i < o.coldNodes {
			continue
		}
		for _, p := range pools {
			if err := n.WaitWarm(wctx, p.Key(), p.Warm); err != nil {
				cancel()
				return fmt.Errorf("node %s never filled its %s pool: %w", n.Name(), p.Key(), err)
			}
		}
	}
	cancel()

	keys := e2b.APIKeys{}
	if !o.anonymous {
		if keys, err = e2b.ParseAPIKeys([]byte(apiKey), namespace); err != nil {
			return err
		}
	}
	builds, dropBuilds, err := o.buildConfig(secret, logger)
	if err != nil {
		return err
	}
	defer dropBuilds()
	cfg := app.Config{
		E2B: e2b.Config{
			Namespace:      namespace,
			Domain:         o.domain,
			DefaultTimeout: time.Duration(o.defaultTimeout) * time.Second,
			Keys:           keys,
			AllowAnonymous: o.anonymous,
			Aliases:        aliases,
			EnvdSecret:     secret,
			Builds:         builds,
			// The create rate and live-sandbox cap are left zero: the
			// surface's defaults (30 at once, then 5/s; 100 live) fit a
			// developer's SDK runs and stop a runaway loop.
		},
		APIAddress:      net.JoinHostPort(o.host, strconv.Itoa(o.port)),
		ProxyAddress:    net.JoinHostPort(o.host, strconv.Itoa(o.dataPort)),
		MetricsAddress:  metricsAddress(o),
		Seeds:           f.Addrs()[:1], // the rest are found through gossip
		Token:           rootToken,
		RefreshInterval: o.refreshInterval,
		ProxyLimits:     o.dataPlaneLimits,
		Wrap:            wrap,
	}
	p, err := app.Start(ctx, cfg, logger)
	if err != nil {
		return err
	}
	for _, n := range f.Nodes() {
		fmt.Fprintf(stdout, "# sandboxd node %s %s\n", n.Name(), n.Addr())
	}
	fmt.Fprintf(stdout, "export E2B_API_URL=%s\n", "http://"+urlHost(p.APIAddr()))
	fmt.Fprintf(stdout, "export E2B_API_KEY=%s\n", apiKey)
	fmt.Fprintf(stdout, "export E2B_DOMAIN=%s\n", o.domain)
	fmt.Fprintf(stdout, "export E2B_SANDBOX_URL=%s\n", "http://"+urlHost(p.ProxyAddr()))
	if addr := p.MetricsAddr(); addr != nil {
		// Not an SDK variable: where Prometheus (or curl) scrapes.
		fmt.Fprintf(stdout, "export SANDBOX_OPERATOR_METRICS_URL=http://%s/metrics\n", urlHost(addr))
	}
	fmt.Fprintln(stdout, "# ready")
	return p.Run(ctx)
}

// metricsAddress is the metrics listener's address, "" for none.
func metricsAddress(o *options) string {
	if o.metricsPort < 0 {
		return ""
	}
	return net.JoinHostPort(o.host, strconv.Itoa(o.metricsPort))
}

// urlHost is the host:port a client on this machine dials for a bound
// address: a wildcard bind is reached through loopback.
func urlHost(addr net.Addr) string {
	tcp, ok := addr.(*net.TCPAddr)
	if !ok {
		return addr.String()
	}
	ip := tcp.IP
	if ip == nil || ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// lockedWriter serializes writes that share stderr with the request log.
type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
