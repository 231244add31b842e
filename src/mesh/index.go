package mesh

import (
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// indexEntry is where the view last saw a sandbox. The index only routes:
// every answer the fleet gives about a sandbox is read from its owner.
type indexEntry struct {
	addr     string
	claimRef string
	// addedAt is when a claim or lookup recorded it, so a refresh that
	// started earlier does not forget a sandbox claimed while it ran.
	addedAt time.Time
}

// rebuildIndexLocked replaces the index with the rows the live nodes
// listed, keeping entries recorded since the refresh started on nodes
// that are still live. m.mu must be held.
func (m *Mesh) rebuildIndexLocked(start time.Time, results []probe) {
	idx := make(map[string]indexEntry, len(m.index))
	for _, p := range results {
		if p.err != nil || p.rows == nil {
			continue
		}
		for _, r := range p.rows {
			if id, ok := sandbox.CanonicalID(r.ID); ok {
				idx[id] = indexEntry{addr: p.addr, claimRef: r.ClaimRef}
			}
		}
	}
	for id, e := range m.index {
		if _, listed := idx[id]; listed || e.addedAt.Before(start) {
			continue
		}
		if n := m.nodes[e.addr]; n != nil && n.live {
			idx[id] = e
		}
	}
	m.index = idx
}

// record notes that id lives on addr under claimRef.
func (m *Mesh) record(id, addr, claimRef string) {
	m.mu.Lock()
	m.index[id] = indexEntry{addr: addr, claimRef: claimRef, addedAt: m.cfg.Clock.Now()}
	m.mu.Unlock()
}

// forget drops id from the index (it was released, or its owner says it
// does not exist).
func (m *Mesh) forget(id string) {
	m.mu.Lock()
	delete(m.index, id)
	m.mu.Unlock()
}

// lookup returns the index entry of a canonical id.
func (m *Mesh) lookup(id string) (indexEntry, bool) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	e, ok := m.index[id]
	return e, ok
}

// recordRows replaces what the index says about addr with a fresh list
// of its sandboxes.
func (m *Mesh) recordRows(addr string, rows []sandboxd.Sandbox) {
	now := m.cfg.Clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	listed := make(map[string]bool, len(rows))
	for _, r := range rows {
		if id, ok := sandbox.CanonicalID(r.ID); ok {
			listed[id] = true
			m.index[id] = indexEntry{addr: addr, claimRef: r.ClaimRef, addedAt: now}
		}
	}
	for id, e := range m.index {
		if e.addr == addr && !listed[id] {
			delete(m.index, id)
		}
	}
}

// dropIndexOfLocked forgets every sandbox of a node that stopped
// answering: a dead node's sandboxes die with it. m.mu must be held.
func (m *Mesh) dropIndexOfLocked(addr string) {
	for id, e := range m.index {
		if e.addr == addr {
			delete(m.index, id)
		}
	}
}
