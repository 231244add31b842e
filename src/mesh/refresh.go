package mesh

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// probe is what one node answered during a refresh.
type probe struct {
	addr  string
	err   error // nil: the node answered GET /v1/peers
	peers []string
	info  *sandboxd.Info     // nil when /v1/info was refused (a tenant token)
	rows  []sandboxd.Sandbox // nil when the index read failed
}

// Refresh probes every address worth asking — the seeds, the members
// already known, and every address a live node names as its peer, found
// transitively in the same call — and replaces the view with what
// answered. It returns an error only when no node answered at all.
func (m *Mesh) Refresh(ctx context.Context) error {
	m.refreshMu.Lock()
	defer m.refreshMu.Unlock()
	start := m.cfg.Clock.Now()

	pending := m.candidates()
	asked := map[string]bool{}
	var results []probe
	for len(pending) > 0 {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("mesh: refresh: %w", err)
		}
		for _, a := range pending {
			asked[a] = true
		}
		round := m.probeAll(ctx, pending)
		results = append(results, round...)
		pending = pending[:0:0]
		for _, p := range round {
			for _, peer := range p.peers {
				if !asked[peer] && len(asked)+len(pending) < m.cfg.MaxNodes {
					if _, err := m.at(peer); err != nil {
						continue // a peer address the client cannot dial
					}
					asked[peer] = true
					pending = append(pending, peer)
				}
			}
		}
	}
	if ctx.Err() != nil {
		// A refresh cut short by shutdown says nothing about the nodes.
		return fmt.Errorf("mesh: refresh: %w", ctx.Err())
	}
	return m.apply(start, results)
}

// candidates are the addresses a refresh starts from.
func (m *Mesh) candidates() []string {
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([]string, 0, len(m.nodes))
	for a := range m.nodes {
		out = append(out, a)
	}
	return out
}

// probeAll asks every address in parallel, each within NodeTimeout.
func (m *Mesh) probeAll(ctx context.Context, addrs []string) []probe {
	out := make([]probe, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() { out[i] = m.probe(ctx, a) })
	}
	wg.Wait()
	return out
}

// probe reads one node: peers (liveness and gossip), info (pools and
// warm counts) and its sandbox index (owners for the locator).
func (m *Mesh) probe(ctx context.Context, addr string) probe {
	p := probe{addr: addr}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.NodeTimeout)
	defer cancel()
	c, err := m.at(addr)
	if err != nil {
		p.err = err
		return p
	}
	if p.peers, err = c.Peers(ctx); err != nil {
		p.err = err
		return p
	}
	if info, err := c.Info(ctx); err == nil {
		p.info = info
	} else if !errors.Is(err, sandboxd.ErrForbidden) && !errors.Is(err, sandboxd.ErrUnauthorized) {
		// It answered peers a moment ago; a failure now is a node going
		// away, not a token without operator rights.
		p.err = err
		return p
	}
	if rows, err := c.Sandboxes(ctx, ""); err == nil {
		p.rows = rows
	} else {
		p.err = err
	}
	return p
}

// apply replaces the view with a refresh's results.
func (m *Mesh) apply(start time.Time, results []probe) error {
	now := m.cfg.Clock.Now()
	var joined, left []string
	var errs []error
	anyLive := false

	m.mu.Lock()
	named := map[string]bool{}
	for _, p := range results {
		if p.err == nil {
			for _, peer := range p.peers {
				named[peer] = true
			}
		}
	}
	for _, p := range results {
		n := m.nodes[p.addr]
		if n == nil {
			if p.err != nil {
				continue // a learned address that never answered
			}
			n = &nodeState{addr: p.addr}
			m.nodes[p.addr] = n
		}
		if p.err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p.addr, p.err))
			if n.live {
				left = append(left, p.addr)
			}
			n.live = false
			continue
		}
		anyLive = true
		if !n.live {
			joined = append(joined, p.addr)
		}
		n.live, n.seenAt, n.info = true, now, p.info
	}
	for a, n := range m.nodes {
		if named[a] {
			n.namedAt = now
		}
		if !n.live && !n.seed && now.Sub(maxTime(n.seenAt, n.namedAt)) > m.cfg.ForgetAfter {
			delete(m.nodes, a)
		}
	}
	m.rebuildIndexLocked(start, results)
	m.mu.Unlock()

	for _, a := range joined {
		m.logger.Info("sandboxd node joined the mesh view", "node", a)
	}
	for _, a := range left {
		m.logger.Warn("sandboxd node stopped answering; left the mesh view", "node", a)
	}
	if !anyLive {
		return fmt.Errorf("mesh: no sandboxd node answered: %w", errors.Join(errs...))
	}
	return nil
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
