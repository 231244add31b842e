package serve

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Defaults of the optional ServerConfig fields. No write timeout is set:
// a create waits for a claim, and the data plane streams command output
// for as long as a command runs.
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultMaxHeaderBytes    = 64 << 10
	DefaultShutdownTimeout   = 10 * time.Second
)

// ServerConfig describes one HTTP listener of a process.
type ServerConfig struct {
	// Name names the listener in logs and errors, e.g. "e2b surface".
	Name string
	// Addr is the TCP address to listen on.
	Addr    string
	Handler http.Handler
	// TLS, when set, serves TLS with it (its certificates or its
	// GetCertificate); otherwise the listener is cleartext.
	TLS *tls.Config
	// Protocols are the HTTP versions offered; nil is net/http's default
	// (HTTP/1.1, and HTTP/2 over TLS).
	Protocols *http.Protocols
	// ReadHeaderTimeout, IdleTimeout, MaxHeaderBytes and ShutdownTimeout
	// (how long in-flight requests may drain) take the Default* values
	// when zero.
	ReadHeaderTimeout, IdleTimeout, ShutdownTimeout time.Duration
	MaxHeaderBytes                                  int
	// BodyIdleTimeout and BodyTimeout bound the reading of every request
	// body (BodyLimits Idle and Total): zero takes DefaultBodyIdleTimeout
	// and DefaultBodyTimeout, negative turns the bound off. A client that
	// sends part of a body and goes silent otherwise holds its connection,
	// and whatever the handler opened for it, forever.
	BodyIdleTimeout, BodyTimeout time.Duration
	// Logger (nil discards) gets the listener's start and drain, and
	// net/http's own error log (TLS handshakes, malformed requests) at
	// debug.
	Logger *slog.Logger
	// MaxConnsPerClient bounds the connections one client address may
	// hold open at once; a connection past it is closed unread. Zero takes
	// DefaultMaxConnsPerClient, negative turns the bound off.
	MaxConnsPerClient int
	// Draining, when set and true, makes every response close its
	// connection (Connection: close). Set it to a Drain's Draining on a
	// plain request-response API behind a Service: a client then leaves
	// the replica's connections while the replica still serves, instead
	// of sending its next request on a kept-alive connection at the moment
	// the shutdown closes it, which resets a request (a POST) no client
	// retries. Not for listeners that upgrade connections: an upgrade's
	// answer must not say close.
	Draining func() bool
}

// Server is a bound listener, served by Serve.
type Server struct {
	name  string
	ln    net.Listener
	srv   *http.Server
	grace time.Duration
	log   *slog.Logger
}

// Listen binds cfg.Addr, so that a port in use fails startup before
// anything is served; or, when the process was handed a listening socket
// bound to cfg.Addr at exec, takes that one (see the package comment).
func Listen(cfg ServerConfig) (*Server, error) {
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ln, socket := ClaimInheritedListener(cfg.Addr)
	if ln != nil {
		logger.Info("using the inherited listening socket", "listener", cfg.Name, "socket", socket, "address", ln.Addr().String())
	} else {
		var err error
		if ln, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("%s: listening on %s: %w", cfg.Name, cfg.Addr, err)
		}
	}
	if perClientMax := cmp.Or(cfg.MaxConnsPerClient, DefaultMaxConnsPerClient); perClientMax > 0 {
		ln = limitPerClient(ln, perClientMax, logger.With("listener", cfg.Name))
	}
	return &Server{
		name: cfg.Name,
		ln:   ln,
		srv: &http.Server{
			Handler:           BoundBodies(closeWhileDraining(cfg.Handler, cfg.Draining), BodyLimits{Idle: cfg.BodyIdleTimeout, Total: cfg.BodyTimeout}),
			TLSConfig:         cfg.TLS,
			Protocols:         cfg.Protocols,
			ReadHeaderTimeout: cmp.Or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
			IdleTimeout:       cmp.Or(cfg.IdleTimeout, DefaultIdleTimeout),
			MaxHeaderBytes:    cmp.Or(cfg.MaxHeaderBytes, DefaultMaxHeaderBytes),
			ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
		},
		grace: cmp.Or(cfg.ShutdownTimeout, DefaultShutdownTimeout),
		log:   logger.With("listener", cfg.Name),
	}, nil
}

// Addr is the bound address (with the port picked for ":0").
func (s *Server) Addr() net.Addr { return s.ln.Addr() }

// Serve serves until ctx ends, then stops accepting and lets in-flight
// requests finish for the shutdown timeout; streams still open after it
// are cut. It answers an error only when the listener fails while
// serving.
//
// The first Serve of the process closes the inherited sockets no Listen
// claimed (CloseUnclaimedListeners): the binaries bind every listener
// before serving any.
func (s *Server) Serve(ctx context.Context) error {
	closeUnclaimedOnce.Do(func() { CloseUnclaimedListeners(s.log) })
	tlsOn := s.srv.TLSConfig != nil
	s.log.Info("serving", "address", s.Addr().String(), "tls", tlsOn)
	served := make(chan error, 1)
	go func() {
		if tlsOn {
			served <- s.srv.ServeTLS(s.ln, "", "")
		} else {
			served <- s.srv.Serve(s.ln)
		}
	}()
	select {
	case err := <-served:
		return fmt.Errorf("%s: serving on %s: %w", s.name, s.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.grace)
	defer cancel()
	if err := s.srv.Shutdown(sctx); err != nil {
		s.log.Warn("cutting the requests still in flight after the shutdown timeout", "timeout", s.grace)
		_ = s.srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("%s: serving on %s: %w", s.name, s.Addr(), err)
	}
	return nil
}

// closeUnclaimedOnce makes only the process's first Serve close the
// unclaimed inherited sockets.
var closeUnclaimedOnce sync.Once

// Close releases the listener of a Server that will not be served.
func (s *Server) Close() error { return s.ln.Close() }

// closeWhileDraining asks the client to close each connection once its
// response is written, while draining says so (see ServerConfig.Draining).
func closeWhileDraining(h http.Handler, draining func() bool) http.Handler {
	if draining == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining() {
			w.Header().Set("Connection", "close")
		}
		h.ServeHTTP(w, r)
	})
}
