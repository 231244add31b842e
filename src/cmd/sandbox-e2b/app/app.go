// Package app builds and runs the whole sandbox-e2b process — the mesh
// view, the e2b surface and, when enabled, the envd data plane — from a
// Config, so the sandbox-e2b binary and the one-command local system
// (sandbox-e2b-local) run the same code.
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/mesh"
)

// Timeouts of the two HTTP servers. Neither sets a write timeout: a
// create waits for a claim, and the data plane streams command output
// for as long as a command runs.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 2 * time.Minute
	// maxHeaderBytes bounds a request's header block on both listeners.
	maxHeaderBytes = 64 << 10
	// ShutdownTimeout bounds draining in-flight requests on shutdown.
	ShutdownTimeout = 10 * time.Second
	// initialRefreshTimeout bounds the refresh done before serving, so a
	// mesh that is down delays startup by this at most; the view keeps
	// retrying afterwards.
	initialRefreshTimeout = 10 * time.Second
)

// Config is a validated sandbox-e2b configuration (see Options.Config).
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
	// TLSCertFile and TLSKeyFile make the data plane serve TLS.
	TLSCertFile, TLSKeyFile string
	GuestHTTP2              bool
	// Wrap, when set, wraps each listener's handler (e.g. a request log);
	// name is "api" or "data-plane".
	Wrap func(name string, h http.Handler) http.Handler
}

// App is a running sandbox-e2b.
type App struct {
	Mesh *mesh.Mesh

	surface *e2b.Server
	logger  *slog.Logger
	apiLn   net.Listener
	proxyLn net.Listener
	servers []*http.Server
	cancel  context.CancelFunc
	errs    chan error
	wg      sync.WaitGroup
}

// Start builds the mesh view, refreshes it once (a mesh that cannot be
// reached yet is logged, not fatal: seeds are retried), binds both
// listeners and serves until Shutdown. ctx bounds only the startup.
func Start(ctx context.Context, cfg Config, logger *slog.Logger) (*App, error) {
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
	e2bCfg := cfg.E2B
	if e2bCfg.Logger == nil {
		e2bCfg.Logger = logger.With("component", "e2b")
	}
	core, err := fleet.New(fleet.Config{
		View: m, Token: cfg.Token, NodeTimeout: cfg.NodeTimeout, FollowRedirects: true,
		Logger: logger.With("component", "fleet"),
	})
	if err != nil {
		return nil, err
	}
	surface, err := e2b.NewServer(e2bCfg, core, e2bCfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("e2b surface: %w", err)
	}
	wrap := cfg.Wrap
	if wrap == nil {
		wrap = func(_ string, h http.Handler) http.Handler { return h }
	}

	a := &App{Mesh: m, surface: surface, logger: logger, errs: make(chan error, 2)}
	var proxy http.Handler
	if cfg.ProxyAddress != "" {
		p, err := envdproxy.New(envdproxy.Config{
			Locator:    m.Locator(""),
			Domain:     cfg.E2B.Domain,
			Secret:     cfg.E2B.EnvdSecret,
			Token:      cfg.Token,
			GuestHTTP2: cfg.GuestHTTP2,
			Logger:     logger.With("component", "envd-proxy"),
		})
		if err != nil {
			return nil, fmt.Errorf("envd proxy: %w", err)
		}
		proxy = p
	}

	// Bind both listeners before serving anything, so a port in use fails
	// startup as a whole.
	if a.apiLn, err = net.Listen("tcp", cfg.APIAddress); err != nil {
		return nil, fmt.Errorf("e2b surface listen %s: %w", cfg.APIAddress, err)
	}
	if proxy != nil {
		if a.proxyLn, err = net.Listen("tcp", cfg.ProxyAddress); err != nil {
			a.apiLn.Close()
			return nil, fmt.Errorf("data plane listen %s: %w", cfg.ProxyAddress, err)
		}
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	startCtx, rcancel := context.WithTimeout(ctx, initialRefreshTimeout)
	a.cancel = cancel
	if err := m.Refresh(startCtx); err != nil {
		logger.Warn("no sandboxd node answered yet; serving anyway and retrying the seeds", "seeds", len(cfg.Seeds), "err", err)
	} else {
		logger.Info("mesh view ready", "nodes", len(m.LiveNodes()))
	}
	rcancel()
	a.wg.Go(func() { m.Run(runCtx) })

	a.serve("api", &http.Server{
		Handler:           wrap("api", surface),
		ReadHeaderTimeout: readHeaderTimeout,
		IdleTimeout:       idleTimeout,
		MaxHeaderBytes:    maxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}, a.apiLn, "", "")
	if proxy != nil {
		a.serve("data-plane", &http.Server{
			Handler:           wrap("data-plane", proxy),
			Protocols:         envdproxy.Protocols(),
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			MaxHeaderBytes:    maxHeaderBytes,
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		}, a.proxyLn, cfg.TLSCertFile, cfg.TLSKeyFile)
	}
	return a, nil
}

func (a *App) serve(name string, srv *http.Server, ln net.Listener, cert, key string) {
	a.servers = append(a.servers, srv)
	a.logger.Info("serving", "listener", name, "addr", ln.Addr().String(), "tls", cert != "")
	a.wg.Go(func() {
		var err error
		if cert != "" {
			err = srv.ServeTLS(ln, cert, key)
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			a.errs <- fmt.Errorf("%s listener: %w", name, err)
		}
	})
}

// APIAddr is the e2b surface's bound address.
func (a *App) APIAddr() net.Addr { return a.apiLn.Addr() }

// ProxyAddr is the data plane's bound address, nil when it is disabled.
func (a *App) ProxyAddr() net.Addr {
	if a.proxyLn == nil {
		return nil
	}
	return a.proxyLn.Addr()
}

// Err delivers a listener that failed while serving.
func (a *App) Err() <-chan error { return a.errs }

// Shutdown stops accepting, drains in-flight requests until ctx ends,
// stops the surface's scheduled auto-pauses and the mesh refresh, and waits
// for every goroutine.
func (a *App) Shutdown(ctx context.Context) error {
	var errs []error
	for _, s := range a.servers {
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, err)
			_ = s.Close()
		}
	}
	a.surface.Close()
	a.cancel()
	a.wg.Wait()
	return errors.Join(errs...)
}
