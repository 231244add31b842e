package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// Node is one simulated sandboxd node.
type Node struct {
	cfg   Config
	log   *slog.Logger
	creds *credentials

	ln        net.Listener
	srv       *http.Server
	addr      string // advertised host:port
	scratch   string // this node's scratch directory
	ownsRoot  string // temp root created by New, removed by Close
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	refillSem chan struct{}
	kick      chan struct{}
	closeOnce sync.Once

	mu          sync.Mutex
	pools       map[sandbox.PoolKey]*pool
	sandboxes   map[string]*claimed
	checkpoints map[string]*checkpoint
	templates   map[sandbox.PoolKey]*promoted
	tenantLive  map[string]int
	volumeHolds volumeHolds // volumes.go
	pending     int         // claims provisioning outside the lock, counted against MaxClaims
	draining    bool
	seq         uint64 // orders checkpoints created in the same clock tick
	relays      map[*relay]struct{}
	// warmMachines are the started machines behind warm VM names
	// (Config.Isolation), until a claim takes one.
	warmMachines map[string]*warmMachine

	stats counters

	// frozenInfo, when set, is what GET /v1/info answers (FreezeInfo).
	frozenInfo atomic.Pointer[sandboxd.Info]
}

// listen binds addr, or takes the socket bound there that the process
// was handed at exec (serve's LISTEN_FDS convention): a node restarted in
// a new process then serves at the address its peers and clients know,
// without the port ever being free for someone else in between.
func listen(addr string) (net.Listener, error) {
	if ln, _ := serve.ClaimInheritedListener(addr); ln != nil {
		return ln, nil
	}
	return net.Listen("tcp", addr)
}

// Start builds a node, binds its listener and serves until Close or ctx
// ends.
func Start(ctx context.Context, cfg Config) (*Node, error) {
	n, err := newNode(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := listen(n.cfg.ListenAddr)
	if err != nil {
		n.cleanupScratch()
		return nil, fmt.Errorf("node %s: listen on %s: %w", n.cfg.Name, n.cfg.ListenAddr, err)
	}
	n.ln = ln
	n.addr = n.cfg.AdvertiseAddr
	if n.addr == "" && n.cfg.AdvertiseHost != "" {
		_, port, _ := net.SplitHostPort(ln.Addr().String())
		n.addr = net.JoinHostPort(n.cfg.AdvertiseHost, port)
	}
	if n.addr == "" {
		n.addr = ln.Addr().String()
	}
	n.srv = &http.Server{
		// Relays stream indefinitely (over a hijacked connection, which
		// the body bounds leave alone) and cold claims block for the
		// provisioning window, so beyond the header read only request
		// bodies are bounded.
		Handler:           serve.BoundBodies(n.Handler(), n.cfg.BodyLimits),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(n.log.Handler(), slog.LevelDebug),
	}

	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.wg.Add(3)
	go func() {
		defer n.wg.Done()
		if err := n.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			n.log.Error("serve failed", "node", n.cfg.Name, "err", err)
		}
	}()
	go func() { defer n.wg.Done(); n.refillLoop() }()
	reapTicker := n.cfg.Clock.NewTicker(n.cfg.ReapInterval)
	go func() { defer n.wg.Done(); n.reapLoop(reapTicker) }()
	if ctx != nil {
		stop := context.AfterFunc(ctx, func() { _ = n.Close() })
		n.wg.Add(1)
		go func() { defer n.wg.Done(); <-n.ctx.Done(); stop() }()
	}
	n.kickRefill()
	n.log.Info("sandboxd simulator node serving", "node", n.cfg.Name, "addr", n.addr)
	return n, nil
}

func newNode(cfg Config) (*Node, error) {
	if err := cfg.applyDefaults(); err != nil {
		return nil, err
	}
	n := &Node{
		cfg:          cfg,
		log:          cfg.Logger,
		creds:        newCredentials(cfg.RootToken, cfg.Tenants),
		pools:        map[sandbox.PoolKey]*pool{},
		sandboxes:    map[string]*claimed{},
		checkpoints:  map[string]*checkpoint{},
		templates:    map[sandbox.PoolKey]*promoted{},
		tenantLive:   map[string]int{},
		relays:       map[*relay]struct{}{},
		warmMachines: map[string]*warmMachine{},
		refillSem:    make(chan struct{}, cfg.RefillConcurrency),
		kick:         make(chan struct{}, 1),
	}
	if _, err := n.applyPools(cfg.Pools); err != nil {
		return nil, fmt.Errorf("node %s: initial pools: %w", cfg.Name, err)
	}
	root := cfg.ScratchRoot
	if root == "" {
		tmp, err := os.MkdirTemp("", "sandboxd-sim-")
		if err != nil {
			return nil, fmt.Errorf("node %s: scratch root: %w", cfg.Name, err)
		}
		root, n.ownsRoot = tmp, tmp
	}
	n.scratch = filepath.Join(root, cfg.Name)
	if err := os.MkdirAll(n.scratch, 0o700); err != nil {
		n.cleanupScratch()
		return nil, fmt.Errorf("node %s: scratch dir: %w", cfg.Name, err)
	}
	return n, nil
}

// Name is the node's mesh name.
func (n *Node) Name() string { return n.cfg.Name }

// Addr is the node's advertised host:port (its owner_addr).
func (n *Node) Addr() string { return n.addr }

// ScratchRoot is the directory holding this node's per-sandbox scratch
// directories.
func (n *Node) ScratchRoot() string { return n.scratch }

// Close stops the node: it stops serving, force-closes relays and guests,
// drops every sandbox (their state is node-local and dies with it) and
// removes the scratch directories. Safe to call more than once.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		if n.cancel != nil {
			n.cancel()
		}
		if n.srv != nil {
			_ = n.srv.Close()
		}
		n.mu.Lock()
		for r := range n.relays {
			r.close()
		}
		var guests []*guestSet
		for _, sb := range n.sandboxes {
			guests = append(guests, sb.guests)
		}
		n.sandboxes = map[string]*claimed{}
		n.mu.Unlock()
		for _, g := range guests {
			g.destroy()
		}
		n.mu.Lock()
		for vm := range n.warmMachines {
			n.discardWarmLocked([]string{vm})
		}
		n.mu.Unlock()
		n.wg.Wait()
		n.cleanupScratch()
	})
	return nil
}

func (n *Node) cleanupScratch() {
	if n.scratch != "" {
		_ = os.RemoveAll(n.scratch)
	}
	if n.ownsRoot != "" {
		_ = os.RemoveAll(n.ownsRoot)
	}
}

// stopping reports whether Close has begun.
func (n *Node) stopping() bool {
	return n.ctx != nil && n.ctx.Err() != nil
}
