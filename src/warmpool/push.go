package warmpool

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// target is one node the driver places pools on.
type target struct {
	Name, Addr string
}

// sent is what the driver last PUT to a node and what the node answered.
type sent struct {
	addr, sig string
	info      *sandboxd.Info
}

// pusher PUTs each node its whole pool set and remembers what it sent, so
// an unchanged set costs no request until the next resync.
type pusher struct {
	token    string
	timeout  time.Duration
	parallel int
	log      *slog.Logger

	noTokenLogged sync.Once
	puts          atomic.Int64
	// onPut, when set, is told of every PUT sent.
	onPut func()
	// observe hears how each push to a node ended.
	observe Observer

	mu      sync.Mutex
	clients map[string]*sandboxd.Client // by address
	sent    map[string]sent             // by node name
}

func newPusher(token string, timeout time.Duration, parallel int, log *slog.Logger) *pusher {
	return &pusher{
		token: token, timeout: timeout, parallel: max(parallel, 1), log: log, observe: unobserved{},
		clients: map[string]*sandboxd.Client{}, sent: map[string]sent{},
	}
}

// push sends every target whose set differs from the last one it took
// (all of them when full), at most parallel at once, and answers the
// nodes that refused. Without a token it sends nothing: the driver fails
// closed rather than calling nodes unauthenticated.
func (p *pusher) push(ctx context.Context, targets []target, sets map[string][]sandboxd.PoolSpec, full bool) map[string]error {
	if p.token == "" {
		p.noTokenLogged.Do(func() {
			p.log.Info("no sandboxd token configured: the warm-pool driver sets no pools (fail-closed)")
		})
		return nil
	}
	p.mu.Lock()
	live := make(map[string]bool, len(targets))
	var due []target
	for _, t := range targets {
		live[t.Name] = true
		last, ok := p.sent[t.Name]
		if full || !ok || last.addr != t.Addr || last.sig != signature(sets[t.Name]) {
			due = append(due, t)
		}
	}
	for name := range p.sent {
		if !live[name] {
			delete(p.sent, name)
		}
	}
	addrs := make(map[string]bool, len(targets))
	for _, t := range targets {
		addrs[t.Addr] = true
	}
	for addr := range p.clients {
		if !addrs[addr] {
			delete(p.clients, addr)
		}
	}
	p.mu.Unlock()

	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		refused = map[string]error{}
		slots   = make(chan struct{}, p.parallel)
	)
	for _, t := range due {
		set := sets[t.Name]
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			info, err := p.putOne(ctx, t, set)
			if ctx.Err() == nil {
				p.observe.ObservePush(err)
			}
			p.mu.Lock()
			if err != nil {
				// Forget the node's answer: its pools are unknown until a
				// PUT succeeds, which the next pass retries.
				p.sent[t.Name] = sent{addr: t.Addr}
			} else {
				p.sent[t.Name] = sent{addr: t.Addr, sig: signature(set), info: info}
			}
			p.mu.Unlock()
			if err != nil {
				mu.Lock()
				refused[t.Name] = err
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return refused
}

func (p *pusher) putOne(ctx context.Context, t target, set []sandboxd.PoolSpec) (*sandboxd.Info, error) {
	c, err := p.client(t.Addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	p.puts.Add(1)
	if p.onPut != nil {
		p.onPut()
	}
	info, err := c.SetPools(ctx, set)
	if err != nil {
		return nil, fmt.Errorf("PUT /v1/pools: %w", err)
	}
	return info, nil
}

func (p *pusher) client(addr string) (*sandboxd.Client, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.clients[addr]; c != nil {
		return c, nil
	}
	c, err := sandboxd.New(addr, sandboxd.WithToken(p.token))
	if err != nil {
		return nil, fmt.Errorf("node address %q: %w", addr, err)
	}
	p.clients[addr] = c
	return c, nil
}

// infos answers the last successful PUT answer of each target (nil where
// the node has none).
func (p *pusher) infos(targets []target) []*sandboxd.Info {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*sandboxd.Info, 0, len(targets))
	for _, t := range targets {
		if s, ok := p.sent[t.Name]; ok && s.addr == t.Addr {
			out = append(out, s.info)
		}
	}
	return out
}
