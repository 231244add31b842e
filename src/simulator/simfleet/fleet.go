package simfleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/gossip"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/codeinterp"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/echo"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// DefaultEchoPort is the guest port the HTTP echo serves when
// Config.EchoPorts is nil.
const DefaultEchoPort = 8080

// Config describes a fleet. Every node gets the same settings; Customize
// can vary them per node.
type Config struct {
	// Nodes is the fleet size; default 1.
	Nodes int
	// ListenHost is the address nodes bind; default 127.0.0.1. Guests run
	// commands on the host, so anything but loopback is a deliberate choice.
	ListenHost string
	// AdvertiseHost is the host nodes advertise (owner_addr, redirects,
	// peers, the published inventory address) with their bound port;
	// default the listen address itself.
	AdvertiseHost string
	// BasePort puts node i on BasePort+i; 0 picks free ports.
	BasePort int
	// NamePrefix names node i NamePrefix+i; default "sim-node-".
	NamePrefix string

	RootToken string
	Tenants   []node.Tenant
	// Volumes is every node's dataset-volume catalog (node.Config.Volumes).
	Volumes []node.Volume

	// Pools is every node's initial pool set.
	Pools              []sandboxd.PoolSpec
	MaxClaims          int
	MaxForkCount       int
	RefillDelay        time.Duration
	ColdProvisionDelay time.Duration
	RefillConcurrency  int
	DefaultTTL         time.Duration
	MaxTTL             time.Duration
	ReapInterval       time.Duration
	// ArchiveDeleteAfter is how long an archived sandbox is kept (see
	// node.Config.ArchiveDeleteAfter); 0 keeps it until it is released.
	ArchiveDeleteAfter time.Duration
	// EgressAttachment lets every node serve the egress lane (see
	// node.Config.EgressAttachment).
	EgressAttachment bool

	// EchoPorts are the guest ports serving the HTTP echo (HTTP/1.1 and
	// h2c); nil means [DefaultEchoPort], an empty slice none.
	EchoPorts []int
	// TCPEchoPorts are guest ports serving the raw TCP echo.
	TCPEchoPorts []int
	// Envd serves the envd-compatible guest on 49983 in every sandbox
	// (see EnvdConfig); nil leaves that port unserved unless EnvdHandler
	// is set. At most one of the two.
	Envd *EnvdConfig
	// EnvdHandler serves a custom envd on 49983.
	EnvdHandler func(sb node.SandboxInfo) (http.Handler, error)
	// Guests are extra guest services.
	Guests []node.Guest

	// ScratchRoot holds the nodes' scratch directories; default a temp
	// directory removed by Close.
	ScratchRoot string
	// Clock is every node's clock and paces the gossip (see
	// node.Config.Clock); nil is the real clock.
	Clock  clock.WithTicker
	Logger *slog.Logger

	// Isolation, when set, runs every sandbox as an isolated machine
	// (IsolationConfig); nil runs the guests in this process.
	Isolation *IsolationConfig

	// Publish, when set, makes every node publish its NodeInventory.
	Publish *PublishConfig

	// Customize adjusts node i's config before it starts.
	Customize func(i int, cfg *node.Config)

	// Join are API addresses of nodes of another fleet (another
	// sandboxd-sim process) whose mesh these nodes join; see package
	// gossip. A fleet with none still takes members that join it.
	Join []string
	// GossipInterval is the time between gossip rounds with other
	// processes' nodes; default gossip.DefaultInterval. A member unheard
	// of for three rounds is dead.
	GossipInterval time.Duration
}

// Fleet is a running set of simulated nodes that are peers of each other.
type Fleet struct {
	ownsRoot   string
	publishers publishers
	remote     *gossip.Members

	mu    sync.RWMutex
	nodes []*node.Node
	alive []bool
}

// Start starts cfg.Nodes nodes. ctx ending closes the fleet.
func Start(ctx context.Context, cfg Config) (*Fleet, error) {
	if cfg.Nodes <= 0 {
		cfg.Nodes = 1
	}
	if cfg.ListenHost == "" {
		cfg.ListenHost = "127.0.0.1"
	}
	if cfg.NamePrefix == "" {
		cfg.NamePrefix = "sim-node-"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.BasePort < 0 || (cfg.BasePort > 0 && cfg.BasePort+cfg.Nodes-1 > 65535) {
		return nil, fmt.Errorf("fleet: base port %d does not fit %d nodes", cfg.BasePort, cfg.Nodes)
	}
	guests, err := guestsFor(cfg)
	if err != nil {
		return nil, err
	}
	envdHandler := cfg.EnvdHandler
	if cfg.Envd != nil {
		if envdHandler != nil {
			return nil, errors.New("fleet: set at most one of Envd and EnvdHandler")
		}
		envdHandler = EnvdHandler(*cfg.Envd)
	}
	if cfg.Publish != nil {
		if err := cfg.Publish.validate(); err != nil {
			return nil, err
		}
	}
	var isolation *node.Isolation
	if cfg.Isolation != nil {
		if isolation, err = nodeIsolation(cfg); err != nil {
			return nil, err
		}
	}
	f := &Fleet{}
	f.remote, err = gossip.New(gossip.Config{
		Join: cfg.Join, Token: cfg.RootToken, Interval: cfg.GossipInterval,
		Clock: cfg.Clock, Logger: cfg.Logger,
	}, f.localAddrs)
	if err != nil {
		return nil, fmt.Errorf("fleet: %w", err)
	}
	root := cfg.ScratchRoot
	if root == "" {
		tmp, err := os.MkdirTemp("", "sandboxd-sim-fleet-")
		if err != nil {
			return nil, fmt.Errorf("fleet: scratch root: %w", err)
		}
		root, f.ownsRoot = tmp, tmp
	}

	for i := range cfg.Nodes {
		port := 0
		if cfg.BasePort > 0 {
			port = cfg.BasePort + i
		}
		nc := node.Config{
			Name:               cfg.NamePrefix + strconv.Itoa(i),
			ListenAddr:         net.JoinHostPort(cfg.ListenHost, strconv.Itoa(port)),
			AdvertiseHost:      cfg.AdvertiseHost,
			RootToken:          cfg.RootToken,
			Tenants:            cfg.Tenants,
			Volumes:            cfg.Volumes,
			MaxClaims:          cfg.MaxClaims,
			MaxForkCount:       cfg.MaxForkCount,
			Pools:              cfg.Pools,
			RefillDelay:        cfg.RefillDelay,
			ColdProvisionDelay: cfg.ColdProvisionDelay,
			RefillConcurrency:  cfg.RefillConcurrency,
			DefaultTTL:         cfg.DefaultTTL,
			MaxTTL:             cfg.MaxTTL,
			ReapInterval:       cfg.ReapInterval,
			ArchiveDeleteAfter: cfg.ArchiveDeleteAfter,
			EgressAttachment:   cfg.EgressAttachment,
			Guests:             guests,
			EnvdHandler:        envdHandler,
			Isolation:          isolation,
			ScratchRoot:        root,
			Mesh:               f,
			Clock:              cfg.Clock,
			Logger:             cfg.Logger,
		}
		if cfg.Customize != nil {
			cfg.Customize(i, &nc)
		}
		n, err := node.Start(ctx, nc)
		if err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("fleet: start node %d: %w", i, err)
		}
		f.mu.Lock()
		f.nodes = append(f.nodes, n)
		f.alive = append(f.alive, true)
		f.mu.Unlock()
		if cfg.Publish != nil {
			if err := f.publishers.start(*cfg.Publish, n, cfg.Logger); err != nil {
				_ = f.Close()
				return nil, err
			}
		}
	}
	go f.remote.Run(context.WithoutCancel(ctxOrBackground(ctx)))
	if ctx != nil {
		context.AfterFunc(ctx, func() { _ = f.Close() })
	}
	return f, nil
}

func ctxOrBackground(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}

// localAddrs are the API addresses of this fleet's nodes, live or killed:
// never remote members.
func (f *Fleet) localAddrs() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		out[i] = n.Addr()
	}
	return out
}

// Introduce implements node.Introductions: another process's nodes
// announced themselves.
func (f *Fleet) Introduce(addrs []string) { f.remote.Introduce(addrs) }

func guestsFor(cfg Config) ([]node.Guest, error) {
	echoPorts := cfg.EchoPorts
	if echoPorts == nil {
		echoPorts = []int{DefaultEchoPort}
	}
	guests := append([]node.Guest(nil), cfg.Guests...)
	for _, p := range echoPorts {
		port := p
		guests = append(guests, node.Guest{
			Port: port,
			H2C:  true,
			HTTP: func(sb node.SandboxInfo) (http.Handler, error) { return echo.Handler(sb.ID, port), nil },
		})
	}
	for _, p := range cfg.TCPEchoPorts {
		guests = append(guests, node.Guest{Port: p, Stream: func(_ node.SandboxInfo, c net.Conn) { echo.ServeStream(c) }})
	}
	if cfg.Isolation == nil && !slices.ContainsFunc(guests, func(g node.Guest) bool { return g.Port == codeinterp.Port }) {
		// The code interpreter runs Python kernels, which only an
		// isolated machine holds: an unisolated node answers its port
		// with why, rather than with nothing.
		guests = append(guests, node.Guest{Port: codeinterp.Port, HTTP: func(node.SandboxInfo) (http.Handler, error) {
			return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "the code interpreter (template "+codeinterp.Template+") runs only in isolated sandboxes; this node runs unisolated", http.StatusNotImplemented)
			}), nil
		}})
	}
	seen := map[int]bool{}
	for _, g := range guests {
		if seen[g.Port] {
			return nil, fmt.Errorf("fleet: two guest services on port %d", g.Port)
		}
		seen[g.Port] = true
	}
	return guests, nil
}

// Peers implements node.Mesh: every live node of this fleet but self, seen
// at once (like a SWIM detection that already happened, with warm counts,
// checkpoints and promoted templates read live), then the members of
// other processes that gossip last heard from (package gossip).
func (f *Fleet) Peers(self *node.Node) []node.Peer {
	remote := f.remote.Live()
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make([]node.Peer, 0, len(f.nodes)+len(remote))
	for i, n := range f.nodes {
		if n != self && f.alive[i] {
			out = append(out, n)
		}
	}
	for _, p := range remote {
		out = append(out, p)
	}
	return out
}

// Nodes returns every node started, live or killed, in index order.
func (f *Fleet) Nodes() []*node.Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return append([]*node.Node(nil), f.nodes...)
}

// Node returns node i.
func (f *Fleet) Node(i int) *node.Node {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.nodes[i]
}

// Alive reports whether node i has not been killed.
func (f *Fleet) Alive(i int) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.alive[i]
}

// Addrs returns the live nodes' addresses in index order.
func (f *Fleet) Addrs() []string {
	f.mu.RLock()
	defer f.mu.RUnlock()
	var out []string
	for i, n := range f.nodes {
		if f.alive[i] {
			out = append(out, n.Addr())
		}
	}
	return out
}

// Kill stops node i abruptly: its listener and every connection close, its
// sandboxes die with it, and the other nodes stop seeing it as a peer.
func (f *Fleet) Kill(i int) error {
	f.mu.Lock()
	if i < 0 || i >= len(f.nodes) {
		f.mu.Unlock()
		return fmt.Errorf("fleet: no node %d", i)
	}
	if !f.alive[i] {
		f.mu.Unlock()
		return nil
	}
	f.alive[i] = false
	n := f.nodes[i]
	f.mu.Unlock()
	f.publishers.stop(i)
	return n.Close()
}

// Close stops every publisher and node and removes the scratch root it
// created.
func (f *Fleet) Close() error {
	f.remote.Close()
	f.publishers.stopAll()
	f.mu.Lock()
	nodes := f.nodes
	for i := range f.alive {
		f.alive[i] = false
	}
	f.mu.Unlock()
	var errs []error
	for _, n := range nodes {
		errs = append(errs, n.Close())
	}
	if f.ownsRoot != "" {
		errs = append(errs, os.RemoveAll(f.ownsRoot))
	}
	return errors.Join(errs...)
}
