// Package envd is the sandboxd simulator's stand-in for e2b's in-guest
// daemon: the HTTP server a sandbox exposes on port 49983. It speaks envd's
// wire contract (REST /health, /files, /envs, /metrics, the internal /init
// and the ConnectRPC process and filesystem services) closely enough that
// the unmodified e2b SDK can drive it, but runs commands as ordinary host
// processes in a per-sandbox scratch directory instead of inside a microVM.
// Inside an isolated sandbox (Config.Machine) it serves the sandbox's whole
// filesystem and runs commands as the sandbox's user instead.
package envd

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"sync"

	"connectrpc.com/connect"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"

	"github.com/cocoonstack/sandbox-operator/src/envd/filesystempb/filesystempbconnect"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
)

// maxRPCMessageBytes bounds one RPC request message. The largest legitimate
// one is a chunk of stdin or pty input.
const maxRPCMessageBytes = 4 << 20

// Guest is one sandbox's envd-compatible server. It is an http.Handler; the
// caller owns the listener and must call Close when the sandbox goes away so
// that every process it started is killed.
type Guest struct {
	cfg     Config
	home    *home
	procs   *processTable
	handler http.Handler

	// envMu guards envs, the sandbox-wide environment: Config.Envs plus
	// whatever POST /init merged in since, and accessToken: Config.AccessToken
	// until a POST /init sets another.
	envMu       sync.RWMutex
	envs        map[string]string
	accessToken string
}

var _ http.Handler = (*Guest)(nil)

// NewHandler builds the guest for cfg. The returned Guest serves HTTP/1.1
// and, unless cfg.HTTP1Only, cleartext HTTP/2 with prior knowledge, so a
// plain http.Server can host it.
func NewHandler(cfg Config) (*Guest, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	h, err := openHome(cfg.Root, cfg.User, cfg.Machine)
	if err != nil {
		return nil, err
	}
	g := &Guest{cfg: cfg, home: h, procs: newProcessTable(), envs: maps.Clone(cfg.Envs), accessToken: cfg.AccessToken}

	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", g.serveHealth)
	mux.HandleFunc("GET /envs", g.serveEnvs)
	mux.HandleFunc("POST /init", g.serveInit)
	mux.HandleFunc("GET /metrics", g.serveMetrics)
	mux.HandleFunc("GET /files", g.serveDownload)
	mux.HandleFunc("POST /files", g.serveUpload)

	// Requests reach the RPC handlers only after the access-token check, so
	// the interceptor has just the user to settle.
	opts := connect.WithHandlerOptions(
		connect.WithInterceptors(userInterceptor{guest: g}),
		connect.WithReadMaxBytes(maxRPCMessageBytes),
	)
	mux.Handle(processpbconnect.NewProcessHandler(&processService{guest: g}, opts))
	mux.Handle(filesystempbconnect.NewFilesystemHandler(&filesystemService{guest: g}, opts))

	var handler http.Handler = g.requireAccessToken(mux)
	if !cfg.HTTP1Only {
		handler = h2c.NewHandler(handler, &http2.Server{})
	}
	g.handler = handler
	return g, nil
}

// ServeHTTP implements http.Handler.
func (g *Guest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.handler.ServeHTTP(w, r)
}

// Version is the envd version the guest claims, for whatever reports it to
// the SDK (the e2b surface's envdVersion).
func (g *Guest) Version() string { return g.cfg.Version }

// Root is the canonical scratch directory the guest serves (on the host).
func (g *Guest) Root() string { return g.cfg.Root }

// Home is the default user's home directory as clients see it,
// /home/<user>; it names Root.
func (g *Guest) Home() string { return guestHome(g.cfg.User) }

// Close kills every process the guest started (their whole process groups)
// and waits for them to be reaped; their open streams end. Processes
// started after Close are refused. Close is safe to call more than once.
func (g *Guest) Close() error {
	var errs []error
	if err := g.procs.closeAll(); err != nil {
		errs = append(errs, err)
	}
	if err := g.home.close(); err != nil && !errors.Is(err, os.ErrClosed) {
		errs = append(errs, fmt.Errorf("envd: closing root: %w", err))
	}
	return errors.Join(errs...)
}
