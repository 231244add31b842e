package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/e2b/kubefleet"
)

// e2bShutdownTimeout bounds the drain of in-flight e2b requests on stop.
const e2bShutdownTimeout = 10 * time.Second

// e2bSurface is the optional e2b-compatible REST surface: plain HTTP on
// its own listener beside the secure port, over the same Service and
// inventory the aggregated API serves from.
type e2bSurface struct {
	logger  *slog.Logger
	addr    string
	surface *e2b.Server
	srv     *http.Server
	// bound is the address actually listened on, once started.
	bound string
}

func newE2BSurface(logger *slog.Logger, o *options, f *fleet, token string) (*e2bSurface, error) {
	if !o.enableE2B {
		return &e2bSurface{}, nil
	}
	kf, err := kubefleet.New(kubefleet.Config{Service: f.service, Store: f.store, Token: token})
	if err != nil {
		return nil, err
	}
	handler, err := e2b.NewServer(o.e2bConfig, kf, logger.With("component", "e2b"))
	if err != nil {
		return nil, fmt.Errorf("building the e2b surface: %w", err)
	}
	if o.e2bConfig.AllowAnonymous {
		logger.Warn("the e2b surface serves anonymous callers (--e2b-allow-anonymous): anyone who reaches the port can claim sandboxes")
	}
	return &e2bSurface{
		logger:  logger,
		addr:    o.e2b.BindAddress,
		surface: handler,
		srv: &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 10 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
		},
	}, nil
}

// start listens (so a taken port fails startup) and serves until ctx
// ends, then drains in-flight requests. A serving failure cancels the
// process through stop. The channel yields the serving error, once.
func (s *e2bSurface) start(ctx context.Context, stop context.CancelFunc) (<-chan error, error) {
	done := make(chan error, 1)
	if s.srv == nil {
		done <- nil
		return done, nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fmt.Errorf("e2b surface: listening on %s (--e2b-bind-address): %w", s.addr, err)
	}
	s.bound = ln.Addr().String()
	s.logger.Info("serving the e2b surface", "address", s.bound)
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(ln) }()
	go func() {
		var err error
		select {
		case err = <-served:
			stop()
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), e2bShutdownTimeout)
			err = s.srv.Shutdown(sctx)
			cancel()
			if serr := <-served; !errors.Is(serr, http.ErrServerClosed) && err == nil {
				err = serr
			}
		}
		if s.surface != nil {
			s.surface.Close()
		}
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		if err != nil {
			err = fmt.Errorf("e2b surface: %w", err)
		}
		done <- err
	}()
	return done, nil
}
