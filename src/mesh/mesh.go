package mesh

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"k8s.io/utils/clock"
)

// Defaults for the zero values of Config.
const (
	DefaultRefreshInterval = 5 * time.Second
	DefaultNodeTimeout     = 3 * time.Second
	DefaultForgetAfter     = 5 * time.Minute
	// DefaultMaxNodes bounds the view, so a node that gossips garbage
	// cannot make every refresh fan out without end.
	DefaultMaxNodes = 1024
)

// Config describes the mesh view.
type Config struct {
	// Seeds are node addresses (host:port or an http(s) origin) to start
	// discovery from; at least one. They are retried forever. Give them as
	// the nodes advertise themselves, or a node is seen twice.
	Seeds []string
	// Token is the fleet sandboxd token presented to every node. The root
	// api_token is needed for pool warm counts (GET /v1/info), per-id
	// reads and the lifecycle verbs by id.
	Token string
	// RefreshInterval is the time between two refreshes of the view.
	RefreshInterval time.Duration
	// NodeTimeout bounds every call to one node made on behalf of the
	// whole mesh (a refresh probe, one node's share of a list), so a dead
	// or hung node never stalls the others.
	NodeTimeout time.Duration
	// ForgetAfter drops a learned (non-seed) node that has neither
	// answered nor been named by a live peer for this long.
	ForgetAfter time.Duration
	// MaxNodes bounds how many addresses the view holds.
	MaxNodes int
	// HTTPClient replaces the sandboxd client's shared transport, e.g. for
	// TLS settings towards https nodes.
	HTTPClient *http.Client
	// Logger receives membership changes; default discards. Tokens are
	// never logged.
	Logger *slog.Logger
	// Clock tells the time and ticks the refreshes; default the real
	// one.
	Clock clock.WithTicker
}

// Mesh is the view of a sandboxd mesh. It is safe for concurrent use.
type Mesh struct {
	cfg    Config
	client *sandboxd.Client // carries the fleet token; At derives per node
	logger *slog.Logger

	mu    sync.RWMutex
	nodes map[string]*nodeState
	index map[string]indexEntry // canonical sandbox id → where it lives

	refreshMu sync.Mutex // one refresh at a time
}

// nodeState is what the view knows about one address.
type nodeState struct {
	addr string
	seed bool
	live bool
	info *sandboxd.Info // nil until a /v1/info read succeeded
	// seenAt is the last successful probe; namedAt the last time a live
	// peer listed this address.
	seenAt, namedAt time.Time
}

// Node is one member of the view, for diagnostics and tests.
type Node struct {
	Addr     string
	Live     bool
	Seed     bool
	Pools    []sandboxd.PoolStatus
	Draining bool
	SeenAt   time.Time
}

// New validates cfg and returns a view holding only the seeds, none of
// them live yet: call Refresh (or Run) to populate it.
func New(cfg Config) (*Mesh, error) {
	if len(cfg.Seeds) == 0 {
		return nil, errors.New("mesh: at least one seed node address is required")
	}
	if cfg.RefreshInterval <= 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = DefaultNodeTimeout
	}
	if cfg.ForgetAfter <= 0 {
		cfg.ForgetAfter = DefaultForgetAfter
	}
	if cfg.MaxNodes <= 0 {
		cfg.MaxNodes = DefaultMaxNodes
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	opts := []sandboxd.Option{sandboxd.WithToken(cfg.Token)}
	if cfg.HTTPClient != nil {
		opts = append(opts, sandboxd.WithHTTPClient(cfg.HTTPClient))
	}
	m := &Mesh{cfg: cfg, logger: logger, nodes: map[string]*nodeState{}, index: map[string]indexEntry{}}
	for _, s := range cfg.Seeds {
		c, err := sandboxd.New(s, opts...)
		if err != nil {
			return nil, fmt.Errorf("mesh: seed %q: %w", s, err)
		}
		if m.client == nil {
			m.client = c
		}
		m.nodes[s] = &nodeState{addr: s, seed: true}
	}
	return m, nil
}

// Run refreshes the view now and then every RefreshInterval until ctx
// ends. A refresh that reaches no node is logged and retried on the next
// tick: seeds are never given up.
func (m *Mesh) Run(ctx context.Context) {
	t := m.cfg.Clock.NewTicker(m.cfg.RefreshInterval)
	defer t.Stop()
	for {
		if err := m.Refresh(ctx); err != nil && ctx.Err() == nil {
			m.logger.Warn("mesh refresh reached no sandboxd node; retrying", "seeds", len(m.cfg.Seeds), "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

// View returns every address the view holds, sorted.
func (m *Mesh) View() []Node {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]Node, 0, len(m.nodes))
	for _, n := range m.nodes {
		v := Node{Addr: n.addr, Live: n.live, Seed: n.seed, SeenAt: n.seenAt}
		if n.info != nil {
			v.Pools = slices.Clone(n.info.Pools)
			v.Draining = n.info.Draining
		}
		out = append(out, v)
	}
	slices.SortFunc(out, func(a, b Node) int { return compareStrings(a.Addr, b.Addr) })
	return out
}

// LiveNodes returns the addresses of the nodes that answered the last
// refresh and have not failed a call since, sorted.
func (m *Mesh) LiveNodes() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.liveLocked()
}

func (m *Mesh) liveLocked() []string {
	out := make([]string, 0, len(m.nodes))
	for _, n := range m.nodes {
		if n.live {
			out = append(out, n.addr)
		}
	}
	slices.Sort(out)
	return out
}

// reachable is the set a fan-out asks: the live nodes, or, before the
// first refresh found any, every address known (the seeds at least).
func (m *Mesh) reachable() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if live := m.liveLocked(); len(live) > 0 {
		return live
	}
	out := make([]string, 0, len(m.nodes))
	for _, n := range m.nodes {
		out = append(out, n.addr)
	}
	slices.Sort(out)
	return out
}

// at returns the fleet-token client for addr.
func (m *Mesh) at(addr string) (*sandboxd.Client, error) {
	c, err := m.client.At(addr)
	if err != nil {
		return nil, fmt.Errorf("mesh: node address %q: %w", addr, err)
	}
	return c, nil
}

// markDead takes addr out of the live set after a call to it failed at
// the transport level; the next refresh that reaches it brings it back.
func (m *Mesh) markDead(addr string, err error) {
	m.mu.Lock()
	n := m.nodes[addr]
	wasLive := n != nil && n.live
	if wasLive {
		n.live = false
	}
	m.dropIndexOfLocked(addr)
	m.mu.Unlock()
	if wasLive {
		m.logger.Warn("sandboxd node stopped answering; left the mesh view", "node", addr, "err", err)
	}
}

// unreachable reports whether err is a transport failure (no HTTP answer)
// rather than a node's refusal or the caller's own cancellation.
func unreachable(ctx context.Context, err error) bool {
	return err != nil && sandboxd.StatusOf(err) == 0 && ctx.Err() == nil &&
		!errors.Is(err, sandboxd.ErrResponseTooLarge) && !errors.Is(err, sandboxd.ErrNoRedirectTarget)
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
