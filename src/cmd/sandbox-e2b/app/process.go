// Package app assembles the sandbox-e2b process: the view of a
// sandboxd mesh, the fleet core over it, the e2b surface and, when
// enabled, the envd data plane, all from one Config. The sandbox-e2b
// binary and the one-command local system (sandbox-e2b-local) both run it.
package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/mesh"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// initialRefreshTimeout bounds the refresh done before serving, so a mesh
// that is down delays startup by this at most; the view keeps retrying
// afterwards.
const initialRefreshTimeout = 10 * time.Second

// Config is a validated sandbox-e2b configuration.
type Config struct {
	E2B e2b.Config
	// APIAddress is the e2b surface's listen address.
	APIAddress string
	// Seeds, Token, RefreshInterval and NodeTimeout configure the mesh
	// view (see mesh.Config).
	Seeds           []string
	Token           string
	RefreshInterval time.Duration
	NodeTimeout     time.Duration
	// ProxyAddress is the data plane's listen address; empty serves none.
	ProxyAddress string
	// TLSCertFile and TLSKeyFile make the data plane serve TLS; a rotated
	// pair is picked up without a restart (serve.CertFiles, run with the process).
	TLSCertFile, TLSKeyFile string
	GuestHTTP2              bool
	// ProxyLimits bound the data plane's request bodies and envd uploads;
	// the zero value turns every bound off, envdproxy.DefaultLimits are
	// the flags' defaults.
	ProxyLimits envdproxy.Limits
	// MetricsAddress is the metrics listener's address (serve.ListenMetrics);
	// empty serves none.
	MetricsAddress string
	// Wrap, when set, wraps each listener's handler (e.g. a request log);
	// name is "api" or "data-plane".
	Wrap func(name string, h http.Handler) http.Handler
}

// Process is a sandbox-e2b with its listeners bound; Run serves it.
type Process struct {
	mesh      *mesh.Mesh
	core      *fleet.Fleet
	surface   *e2b.Server
	api       *serve.Server
	dataPlane *serve.Server    // nil without a data plane
	certs     *serve.CertFiles // nil without TLS on the data plane
	metrics   *serve.Server    // nil without a metrics address
	registry  *prometheus.Registry
	logger    *slog.Logger
}

// Start builds the process, binds both listeners (so a port in use fails
// startup as a whole) and refreshes the mesh view once within ctx; a mesh
// that cannot be reached yet is logged, not fatal, since seeds are
// retried.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*Process, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m, err := mesh.New(mesh.Config{
		Seeds:           cfg.Seeds,
		Token:           cfg.Token,
		RefreshInterval: cfg.RefreshInterval,
		NodeTimeout:     cfg.NodeTimeout,
		Logger:          logger.With("component", "mesh"),
	})
	if err != nil {
		return nil, err
	}
	// One registry for the process: what the metrics listener serves.
	registry := metrics.NewRegistry()
	claims := metrics.NewClaims(registry)
	core, err := fleet.New(fleet.Config{
		View: m, Token: cfg.Token, NodeTimeout: cfg.NodeTimeout, FollowRedirects: true,
		Logger: logger.With("component", "fleet"), ClaimObserver: claims,
		OperationObserver: metrics.NewLifecycle(registry),
	})
	if err != nil {
		return nil, err
	}
	metrics.RegisterFleetView(registry, meshFleetView(m), nil)
	e2bCfg := cfg.E2B
	if b := e2bCfg.Builds; b != nil {
		builds := *b // shared with the caller's Config: the copy gets the observer
		builds.Observer = metrics.NewBuilds(registry)
		e2bCfg.Builds = &builds
	}
	e2bCfg.Refusals = metrics.NewRefusals(registry, metrics.FrontE2B)
	e2bCfg.Lists = metrics.NewLists(registry, metrics.FrontE2B)
	if e2bCfg.Logger == nil {
		e2bCfg.Logger = logger.With("component", "e2b")
	}
	surface, err := e2b.NewServer(e2bCfg, core, e2bCfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("e2b surface: %w", err)
	}
	p := &Process{mesh: m, core: core, surface: surface, registry: registry, logger: logger}
	if err := p.listen(cfg, m); err != nil {
		surface.Close()
		core.Close()
		return nil, err
	}

	rctx, cancel := context.WithTimeout(ctx, initialRefreshTimeout)
	defer cancel()
	if err := m.Refresh(rctx); err != nil {
		logger.Warn("no sandboxd node answered yet; serving anyway and retrying the seeds", "seeds", len(cfg.Seeds), "err", err)
	} else {
		logger.Info("mesh view ready", "nodes", len(m.LiveNodes()))
	}
	return p, nil
}

// listen builds the data plane, when there is one, and binds both
// listeners.
func (p *Process) listen(cfg Config, m *mesh.Mesh) error {
	wrap := cfg.Wrap
	if wrap == nil {
		wrap = func(_ string, h http.Handler) http.Handler { return h }
	}
	var dataPlane *serve.ServerConfig
	if cfg.ProxyAddress != "" {
		pcfg := envdproxy.Config{
			Locator:    m.Locator(""),
			Domain:     cfg.E2B.Domain,
			Secret:     cfg.E2B.EnvdSecret,
			Token:      cfg.Token,
			GuestHTTP2: cfg.GuestHTTP2,
			Logger:     p.logger.With("component", "envd-proxy"),
			Observer:   metrics.NewDataPlane(p.registry),
		}
		cfg.ProxyLimits.Apply(&pcfg)
		proxy, err := envdproxy.New(pcfg)
		if err != nil {
			return fmt.Errorf("envd proxy: %w", err)
		}
		dataPlane = &serve.ServerConfig{Name: "data-plane", Addr: cfg.ProxyAddress, Handler: wrap("data-plane", proxy),
			Protocols: envdproxy.Protocols(), Logger: p.logger}
		cfg.ProxyLimits.ApplyServer(dataPlane)
		if cfg.TLSCertFile != "" {
			certs, err := serve.LoadCertFiles(cfg.TLSCertFile, cfg.TLSKeyFile)
			if err != nil {
				return fmt.Errorf("data plane: %w", err)
			}
			dataPlane.TLS = certs.TLSConfig()
			p.certs = certs
		}
	}
	api, err := serve.Listen(serve.ServerConfig{Name: "api", Addr: cfg.APIAddress, Handler: wrap("api", p.surface), Logger: p.logger})
	if err != nil {
		return err
	}
	if dataPlane != nil {
		if p.dataPlane, err = serve.Listen(*dataPlane); err != nil {
			_ = api.Close()
			return err
		}
	}
	if cfg.MetricsAddress != "" {
		if p.metrics, err = serve.ListenMetrics(cfg.MetricsAddress, p.registry, p.logger); err != nil {
			_ = api.Close()
			if p.dataPlane != nil {
				_ = p.dataPlane.Close()
			}
			return err
		}
	}
	p.api = api
	return nil
}

// APIAddr is the e2b surface's bound address.
func (p *Process) APIAddr() net.Addr { return p.api.Addr() }

// MetricsAddr is the metrics listener's bound address, nil when it is
// disabled.
func (p *Process) MetricsAddr() net.Addr {
	if p.metrics == nil {
		return nil
	}
	return p.metrics.Addr()
}

// ProxyAddr is the data plane's bound address, nil when it is disabled.
func (p *Process) ProxyAddr() net.Addr {
	if p.dataPlane == nil {
		return nil
	}
	return p.dataPlane.Addr()
}

// Run serves and refreshes the mesh view until ctx ends, then drains
// in-flight requests and stops the surface's scheduled auto-pauses. A
// listener that fails stops the process and is the error returned.
func (p *Process) Run(ctx context.Context) error {
	g := serve.NewGroup(ctx, p.logger)
	g.Loop(p.mesh.Run)
	g.Go("e2b surface", func(ctx context.Context) error {
		defer p.core.Close()
		defer p.surface.Close()
		return p.api.Serve(ctx)
	})
	if p.dataPlane != nil {
		g.Go("data plane", p.dataPlane.Serve)
	}
	if p.certs != nil {
		g.Go("certificate watcher", p.certs.Run)
	}
	if p.metrics != nil {
		g.Go("metrics", p.metrics.Serve)
	}
	return g.Wait()
}
