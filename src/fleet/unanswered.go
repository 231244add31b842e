package fleet

import (
	"slices"
	"sync"
	"time"
)

// unansweredFor is how long a node whose claim got no answer goes last in
// the claim order when nothing is heard from it meanwhile. The re-check
// of that claim (releaseOrphans) asks the node again within seconds and
// ends the wait as soon as the node answers, and re-arms it on every
// silence; this bound only matters once no re-check is running, so that a
// node back after a long outage is not avoided for ever.
const unansweredFor = 30 * time.Second

// unanswered is the set of nodes whose last claim got no answer at all
// (a timeout, a refused or reset connection) and which have not answered
// anything since. Claims go to every other candidate first.
//
// The Kubernetes front needs it most: its view is the published
// NodeInventory, which a node cut off from this replica, but not from the
// kube-apiserver, keeps fresh. Without it every create that drew such a
// node waited a whole node timeout before moving on, for as long as the
// partition lasted; with it, one create per replica pays that, and the
// node takes claims again once it answers. The mesh view of sandbox-e2b
// drops a silent node by itself; there this changes nothing.
type unanswered struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// silent records that the node at addr did not answer at now, and
// reports whether it was answering until then.
func (u *unanswered) silent(addr string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.until == nil {
		u.until = map[string]time.Time{}
	}
	// Nodes that left the fleet while silent are never asked about again;
	// their lapsed marks go here, so the set stays as small as the
	// silences of the last unansweredFor.
	for a, until := range u.until {
		if a != addr && !now.Before(until) {
			delete(u.until, a)
		}
	}
	prev, was := u.until[addr]
	u.until[addr] = now.Add(unansweredFor)
	return !was || !now.Before(prev)
}

// heard records an answer from the node at addr, and reports whether it
// had been silent.
func (u *unanswered) heard(addr string, now time.Time) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.until[addr]
	if !ok {
		return false
	}
	delete(u.until, addr)
	return now.Before(until)
}

// last moves the silent nodes behind the others, each group keeping its
// order: they are still tried when no other node can take the claim.
func (u *unanswered) last(nodes []Node, now time.Time) []Node {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.until) == 0 {
		return nodes
	}
	var answering, silent []Node
	for _, n := range nodes {
		if until, ok := u.until[n.Addr]; ok {
			if now.Before(until) {
				silent = append(silent, n)
				continue
			}
			delete(u.until, n.Addr)
		}
		answering = append(answering, n)
	}
	return append(answering, silent...)
}

// silentNode records a node that did not answer a claim, or the re-check
// after one: claims go to the other nodes first until it answers.
func (f *Fleet) silentNode(addr string, err error) {
	if f.unanswered.silent(addr, f.cfg.Clock.Now()) {
		f.log.Info("A node did not answer; claims go to the other nodes first until it does", "node", addr, "err", err)
	}
	if f.rec != nil {
		f.rec.Unreachable(addr, err)
	}
}

// heardFrom records an answer from the node at addr.
func (f *Fleet) heardFrom(addr string) {
	if f.unanswered.heard(addr, f.cfg.Clock.Now()) {
		f.log.Info("A node that did not answer answers again", "node", addr)
	}
}

// silentAt returns the addresses still marked silent at now, sorted.
func (u *unanswered) silentAt(now time.Time) []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	var out []string
	for addr, until := range u.until {
		if now.Before(until) {
			out = append(out, addr)
		}
	}
	slices.Sort(out)
	return out
}

// SilentNodes returns the addresses of the nodes whose last claim got no
// answer and which have not answered since (claims go to them last), for
// the operators' count of silent nodes.
func (f *Fleet) SilentNodes() []string {
	return f.unanswered.silentAt(f.cfg.Clock.Now())
}
