package node

import (
	"cmp"
	"slices"
	"time"
)

// Phases an inventory entry reports.
const (
	PhaseRunning    = "Running"
	PhaseHibernated = "Hibernated"
	// PhaseFailed is a claim whose machine died and was not restarted.
	PhaseFailed = "Failed"
)

// Snapshot is a read-only view of the node for inventory publishing: what
// a NodeInventory object carries, without any token.
type Snapshot struct {
	Node    string
	Address string
	Pools   []PoolSnapshot
	Entries []EntrySnapshot
}

// PoolSnapshot is one pool's key and warm capacity.
type PoolSnapshot struct {
	Template, Net, Size string
	Warm, Target        int
}

// EntrySnapshot is one live claim. Name is the claim_ref when the claim
// named one, the sandbox id otherwise.
type EntrySnapshot struct {
	Name      string
	Phase     string
	ID        string
	ClaimRef  string
	Addr      string
	Template  string
	Net, Size string
	Deadline  time.Time
	ClaimedAt time.Time
}

// Snapshot returns the node's pools and live claims, entries sorted by
// name.
func (n *Node) Snapshot() Snapshot {
	info := n.info()
	s := Snapshot{Node: n.cfg.Name, Address: n.addr}
	for _, p := range info.Pools {
		s.Pools = append(s.Pools, PoolSnapshot{Template: p.Key.Template, Net: p.Key.Net, Size: p.Key.Size, Warm: p.Warm, Target: p.Target})
	}
	n.mu.Lock()
	s.Entries = make([]EntrySnapshot, 0, len(n.sandboxes))
	for _, sb := range n.sandboxes {
		name := cmp.Or(sb.claimRef, sb.id)
		phase := PhaseRunning
		switch {
		case sb.failed != "":
			phase = PhaseFailed
		case sb.hibernated:
			phase = PhaseHibernated
		}
		s.Entries = append(s.Entries, EntrySnapshot{
			Name: name, Phase: phase, ID: sb.id, ClaimRef: sb.claimRef, Addr: n.addr,
			Template: sb.key.Template, Net: sb.key.Net, Size: sb.key.Size,
			Deadline: sb.deadline, ClaimedAt: sb.claimedAt,
		})
	}
	n.mu.Unlock()
	slices.SortFunc(s.Entries, func(a, b EntrySnapshot) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.ID, b.ID))
	})
	return s
}
