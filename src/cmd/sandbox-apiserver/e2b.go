package main

import (
	"context"
	"fmt"
	"log/slog"

	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// listenE2B builds the optional e2b-compatible REST surface, plain HTTP
// on its own listener beside the secure port over the same Service and
// inventory the aggregated API serves from, and binds that listener so a
// taken port fails startup. It answers nil when the surface is disabled,
// else what serves it until ctx ends.
func listenE2B(logger *slog.Logger, o *options, f *fleet, token string, drain *serve.Drain) (func(ctx context.Context) error, error) {
	if !o.enableE2B {
		return nil, nil
	}
	// The same fleet core the Sandbox API claims through: an e2b create
	// shows in kubectl get sandboxes (and its watches) at once.
	cfg := o.e2bConfig
	if b := cfg.Builds; b != nil {
		builds := *b // shared with o.e2bConfig: the copy gets the observer
		builds.Observer = metrics.NewBuilds(legacyregistry.Registerer())
		cfg.Builds = &builds
	}
	cfg.Refusals = metrics.NewRefusals(legacyregistry.Registerer(), metrics.FrontE2B)
	cfg.Lists = metrics.NewLists(legacyregistry.Registerer(), metrics.FrontE2B)
	surface, err := e2b.NewServer(cfg, f.service.Fleet(), logger.With("component", "e2b"))
	if err != nil {
		return nil, fmt.Errorf("building the e2b surface: %w", err)
	}
	if o.e2bConfig.AllowAnonymous {
		logger.Warn("the e2b surface serves anonymous callers (--e2b-allow-anonymous): anyone who reaches the port can claim sandboxes")
	}
	srv, err := serve.Listen(serve.ServerConfig{Name: "e2b surface", Addr: o.e2b.BindAddress, Handler: surface, Logger: logger,
		Draining: drain.Draining})
	if err != nil {
		surface.Close()
		return nil, fmt.Errorf("--e2b-bind-address: %w", err)
	}
	return func(ctx context.Context) error {
		defer surface.Close() // stops its scheduled auto-pauses
		return srv.Serve(ctx)
	}, nil
}
