// Package gossip joins simulated nodes that run in separate processes into
// one mesh, standing in for the memberlist gossip real sandboxd nodes use.
//
// Real sandboxd gossips placement hints (warm counts per pool key, promoted
// templates) and membership on a separate port and detects a dead member
// after a few missed probes. The simulator carries the same hints over the
// nodes' own HTTP API: every Interval a process reads GET /v1/info of every
// member it knows (the seeds it was told to join, and every address those
// report as peers), and a member unheard of for DeadAfter is dead: peers
// stop redirecting to it and GET /v1/peers stops listing it. A read
// introduces the reading process's nodes to the member
// (node.IntroductionHeader), so a mesh forms from seeds in one direction, as a memberlist join
// does.
package gossip

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

var _ node.Peer = Peer{}

// Defaults for Config.
const (
	DefaultInterval = time.Second
	// deadRounds missed rounds make a member dead: SWIM's suspicion
	// timeout, a few probe periods.
	deadRounds = 3
	// forgetRounds missed rounds drop a learned (not seed) member.
	forgetRounds = 60
	// maxIntroduced bounds the addresses one introduction may add.
	maxIntroduced = 64
	// maxMembers bounds the members one process tracks.
	maxMembers = 1024
)

// Config configures a Members.
type Config struct {
	// Join are API addresses (host:port) of members of an existing mesh;
	// none starts a new mesh that others may join.
	Join []string
	// Token is the mesh's root api_token (it is cluster-invariant in
	// sandboxd); empty for open nodes.
	Token string
	// Interval is the time between gossip rounds; default DefaultInterval.
	Interval time.Duration
	// DeadAfter is how long a member may go unheard before it is dead;
	// default three Intervals.
	DeadAfter time.Duration
	// HTTPClient carries the gossip reads; default a client with a
	// timeout of one Interval.
	HTTPClient *http.Client
	// Clock stamps what was heard when and paces the rounds; default the
	// real clock.
	Clock  clock.WithTicker
	Logger *slog.Logger
}

// Members is one process's view of the remote members of its mesh. It is
// safe for concurrent use.
type Members struct {
	cfg   Config
	local func() []string
	log   *slog.Logger

	mu      sync.Mutex
	members map[string]*member

	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// member is what this process last heard from one remote node.
type member struct {
	addr  string
	seed  bool
	added time.Time
	heard time.Time // zero until the first successful read
	info  sandboxd.Info
}

// New validates cfg. local returns the API addresses of this process's own
// nodes: they are announced to every member read and never tracked as
// remote members themselves.
func New(cfg Config, local func() []string) (*Members, error) {
	cfg.Interval = cmp.Or(cfg.Interval, DefaultInterval)
	if cfg.Interval < 0 || cfg.DeadAfter < 0 {
		return nil, errors.New("gossip: Interval and DeadAfter must not be negative")
	}
	cfg.DeadAfter = cmp.Or(cfg.DeadAfter, deadRounds*cfg.Interval)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if local == nil {
		local = func() []string { return nil }
	}
	m := &Members{
		cfg: cfg, local: local, log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler)),
		members: map[string]*member{}, stop: make(chan struct{}), done: make(chan struct{}),
	}
	if m.cfg.HTTPClient == nil {
		m.cfg.HTTPClient = &http.Client{Timeout: cfg.Interval}
	}
	now := cfg.Clock.Now()
	for _, addr := range cfg.Join {
		addr = strings.TrimSpace(addr)
		if addr == "" {
			continue
		}
		if _, err := url.Parse("http://" + addr); err != nil || !strings.Contains(addr, ":") {
			return nil, errors.New("gossip: join address " + addr + " is not host:port")
		}
		m.members[addr] = &member{addr: addr, seed: true, added: now}
	}
	return m, nil
}

// Run gossips every Interval until ctx ends or Close is called.
func (m *Members) Run(ctx context.Context) {
	defer close(m.done)
	t := m.cfg.Clock.NewTicker(m.cfg.Interval)
	defer t.Stop()
	for {
		m.round(ctx)
		select {
		case <-ctx.Done():
			return
		case <-m.stop:
			return
		case <-t.C():
		}
	}
}

// Close stops Run and waits for it, if it was started.
func (m *Members) Close() {
	m.once.Do(func() { close(m.stop) })
}

// Wait blocks until Run has returned.
func (m *Members) Wait() { <-m.done }

// Introduce records addresses a member announced as its own nodes; they
// are read from the next round on and are live once a read succeeds.
func (m *Members) Introduce(addrs []string) {
	if len(addrs) > maxIntroduced {
		addrs = addrs[:maxIntroduced]
	}
	m.add(addrs, false)
}

// add starts tracking addrs that are neither local nor known already.
func (m *Members) add(addrs []string, seed bool) {
	local := m.local()
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range addrs {
		if a == "" || slices.Contains(local, a) || len(m.members) >= maxMembers {
			continue
		}
		if _, known := m.members[a]; !known {
			m.members[a] = &member{addr: a, seed: seed, added: now}
		}
	}
}

// Live returns the remote members heard from within DeadAfter, sorted by
// address.
func (m *Members) Live() []Peer {
	now := m.cfg.Clock.Now()
	local := m.local()
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Peer
	for _, mb := range m.members {
		if mb.heard.IsZero() || now.Sub(mb.heard) > m.cfg.DeadAfter || slices.Contains(local, mb.addr) {
			continue
		}
		out = append(out, Peer{addr: mb.addr, info: mb.info, probe: m.probeCheckpoint})
	}
	slices.SortFunc(out, func(a, b Peer) int { return strings.Compare(a.addr, b.addr) })
	return out
}

// round reads every known member once, concurrently, and forgets learned
// members silent for long.
func (m *Members) round(ctx context.Context) {
	now := m.cfg.Clock.Now()
	local := m.local()
	m.mu.Lock()
	var targets []string
	for addr, mb := range m.members {
		last := mb.heard
		if last.IsZero() {
			last = mb.added
		}
		if !mb.seed && now.Sub(last) > forgetRounds*m.cfg.Interval {
			delete(m.members, addr)
			continue
		}
		if !slices.Contains(local, addr) {
			targets = append(targets, addr)
		}
	}
	m.mu.Unlock()
	var wg sync.WaitGroup
	for _, addr := range targets {
		wg.Go(func() { m.read(ctx, addr, local) })
	}
	wg.Wait()
}

// read fetches one member's info and the peers it reports.
func (m *Members) read(ctx context.Context, addr string, local []string) {
	hc := *m.cfg.HTTPClient
	hc.Transport = introducing{next: cmp.Or[http.RoundTripper](hc.Transport, http.DefaultTransport), addrs: strings.Join(local, ",")}
	c, err := sandboxd.New(addr, sandboxd.WithToken(m.cfg.Token), sandboxd.WithHTTPClient(&hc))
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.Interval)
	defer cancel()
	info, err := c.Info(ctx)
	if err != nil {
		m.log.Debug("Gossip read failed", "member", addr, "err", err)
		return
	}
	m.mu.Lock()
	if mb := m.members[addr]; mb != nil {
		if mb.heard.IsZero() || m.cfg.Clock.Now().Sub(mb.heard) > m.cfg.DeadAfter {
			m.log.Info("Mesh member is alive", "member", addr)
		}
		mb.heard, mb.info = m.cfg.Clock.Now(), *info
	}
	m.mu.Unlock()
	m.add(info.Peers, false)
}

// probeCheckpoint asks a member whether it holds a checkpoint, live, as
// sandboxd's checkpoint ownership probe does (it is never gossiped).
func (m *Members) probeCheckpoint(addr, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), m.cfg.Interval)
	defer cancel()
	u := "http://" + addr + "/v1/checkpoints/" + url.PathEscape(id) + "/blob"
	req, err := http.NewRequestWithContext(ctx, http.MethodHead, u, nil)
	if err != nil {
		return false
	}
	if m.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+m.cfg.Token)
	}
	resp, err := m.cfg.HTTPClient.Do(req)
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// introducing adds the introduction header to every gossip read.
type introducing struct {
	next  http.RoundTripper
	addrs string
}

func (t introducing) RoundTrip(r *http.Request) (*http.Response, error) {
	if t.addrs == "" {
		return t.next.RoundTrip(r)
	}
	r = r.Clone(r.Context())
	r.Header.Set(node.IntroductionHeader, t.addrs)
	return t.next.RoundTrip(r)
}

// Peer is a remote member as gossip last saw it; it implements node.Peer.
type Peer struct {
	addr  string
	info  sandboxd.Info
	probe func(addr, id string) bool
}

// Addr is the member's API address.
func (p Peer) Addr() string { return p.addr }

// WarmCount is the member's gossiped warm count for key (0 while it
// drains).
func (p Peer) WarmCount(key sandbox.PoolKey) int {
	if p.info.Draining {
		return 0
	}
	if s, ok := p.info.Pool(key); ok {
		return s.Warm
	}
	return 0
}

// HasTemplate reports whether the member gossiped a promoted template for
// key.
func (p Peer) HasTemplate(key sandbox.PoolKey) bool {
	key = key.WithDefaults()
	for _, t := range p.info.Templates {
		if t.Key.WithDefaults() == key {
			return true
		}
	}
	return false
}

// HasCheckpoint probes the member live.
func (p Peer) HasCheckpoint(id string) bool { return p.probe(p.addr, id) }
