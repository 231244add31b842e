package node

import (
	"cmp"
	"context"
	"net/http"
	"slices"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// netEgress is the egress lane; the simulator serves it only with
// Config.EgressAttachment.
const netEgress = "egress"

// checkKey validates a pool key's axes the way a claim and a pool spec do.
func (n *Node) checkKey(key sandbox.PoolKey) *apiError {
	switch {
	case key.Template == "":
		return errorf(http.StatusBadRequest, "template is required")
	case key.Net == netEgress && n.cfg.EgressAttachment:
	case key.Net == netEgress:
		return errorf(http.StatusConflict, "egress requested on a node without an egress attachment")
	case key.Net != sandbox.DefaultNet:
		return errorf(http.StatusBadRequest, "unknown net %q", key.Net)
	}
	if _, ok := n.cfg.Sizes[key.Size]; !ok {
		return errorf(http.StatusBadRequest, "unknown size %q", key.Size)
	}
	return nil
}

// applyPools replaces the whole pool set: kept keys take the new target,
// new keys start without a golden, omitted keys drain (their warm VMs are
// destroyed and the entry retires). Live claims are untouched.
func (n *Node) applyPools(specs []sandboxd.PoolSpec) (sandboxd.Info, *apiError) {
	want := make(map[sandbox.PoolKey]sandboxd.PoolSpec, len(specs))
	for _, s := range specs {
		key := s.Key()
		if err := n.checkKey(key); err != nil {
			return sandboxd.Info{}, errorf(err.status, "bad pool key %s: %s", key, err.msg)
		}
		switch {
		case s.Warm < 0:
			return sandboxd.Info{}, errorf(http.StatusBadRequest, "pool %s: negative warm", key)
		case s.WarmMax != 0 && s.WarmMax < s.Warm:
			return sandboxd.Info{}, errorf(http.StatusBadRequest, "pool %s: warm_max below warm", key)
		case s.IdleHibernateSeconds < 0:
			return sandboxd.Info{}, errorf(http.StatusBadRequest, "pool %s: negative idle_hibernate_seconds", key)
		}
		if _, dup := want[key]; dup {
			return sandboxd.Info{}, errorf(http.StatusBadRequest, "duplicate pool %s", key)
		}
		want[key] = s
	}

	n.mu.Lock()
	for key, p := range n.pools {
		if _, keep := want[key]; !keep {
			p.retired = true
			n.discardWarmLocked(p.warm)
			p.warm = nil
			delete(n.pools, key)
		}
	}
	for key, s := range want {
		p := n.pools[key]
		if p == nil {
			p = &pool{key: key}
			n.pools[key] = p
		}
		p.target = s.Warm
		p.idleHibernate = time.Duration(s.IdleHibernateSeconds) * time.Second
		if len(p.warm) > p.target {
			n.discardWarmLocked(p.warm[p.target:])
			p.warm = p.warm[:p.target] // scale down: destroy the surplus
		}
	}
	n.mu.Unlock()
	n.kickRefill()
	return n.info(), nil
}

func (n *Node) kickRefill() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// refillLoop keeps every pool at its target: first a golden (a cold
// boot), then clones of it, at most RefillConcurrency at once.
func (n *Node) refillLoop() {
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.kick:
		}
		n.refillOnce()
	}
}

func (n *Node) refillOnce() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.draining {
		return
	}
	for _, p := range n.pools {
		if !p.golden {
			// Every configured pool keeps a golden, even at warm 0: a
			// miss on it clones instead of cold-booting.
			if !p.building {
				p.building = true
				n.spawn(n.cfg.ColdProvisionDelay, func() { n.goldenBuilt(p) })
			}
			continue
		}
		if n.cfg.RefillDelay == 0 && n.cfg.Isolation == nil {
			n.fillInstantlyLocked(p)
			continue
		}
		for len(p.warm)+p.refilling < p.target {
			select {
			case n.refillSem <- struct{}{}:
			default:
				return // at concurrency; a finishing clone kicks again
			}
			p.refilling++
			n.spawn(n.cfg.RefillDelay, func() { <-n.refillSem; n.cloneBuilt(p) })
		}
	}
}

// fillInstantlyLocked tops a pool up when cloning takes no time.
func (n *Node) fillInstantlyLocked(p *pool) {
	if n.cfg.Isolation != nil {
		return // machines take time to start: the refill loop starts them
	}
	for p.golden && !n.draining && len(p.warm)+p.refilling < p.target {
		p.warm = append(p.warm, newVMName())
	}
}

// spawn runs done after delay on the node clock unless the node stops
// first. A zero delay runs done at once: a fake clock would otherwise hold
// it until the test steps.
func (n *Node) spawn(delay time.Duration, done func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		if delay > 0 {
			t := n.cfg.Clock.NewTimer(delay)
			defer t.Stop()
			select {
			case <-n.ctx.Done():
			case <-t.C():
			}
		}
		done()
	}()
}

func (n *Node) goldenBuilt(p *pool) {
	n.mu.Lock()
	p.building = false
	if !p.retired && !n.stopping() {
		p.golden = true
	}
	n.mu.Unlock()
	n.kickRefill()
}

func (n *Node) cloneBuilt(p *pool) {
	var wm *warmMachine
	if n.cfg.Isolation != nil && !n.stopping() {
		var err error
		if wm, err = n.prepareWarm(p.key); err != nil {
			n.log.Warn("refill: starting a warm machine failed; retrying", "node", n.cfg.Name, "pool", p.key.String(), "err", err)
			n.mu.Lock()
			p.refilling--
			n.mu.Unlock()
			n.spawn(time.Second, n.kickRefill)
			return
		}
	}
	n.mu.Lock()
	p.refilling--
	if !p.retired && !n.draining && !n.stopping() && len(p.warm) < p.target {
		vm := newVMName()
		p.warm = append(p.warm, vm)
		if wm != nil {
			n.warmMachines[vm], wm = wm, nil
		}
	}
	n.mu.Unlock()
	if wm != nil {
		_ = wm.m.Close()
	}
	n.kickRefill()
}

// info renders the GET /v1/info payload. It reads the mesh, so the caller
// must not hold n.mu.
func (n *Node) info() sandboxd.Info {
	peers := n.peerAddrs()
	n.mu.Lock()
	defer n.mu.Unlock()
	out := sandboxd.Info{
		Pools:    make([]sandboxd.PoolStatus, 0, len(n.pools)),
		Claimed:  len(n.sandboxes),
		Draining: n.draining,
		Peers:    peers,
	}
	for _, p := range n.pools {
		out.Pools = append(out.Pools, sandboxd.PoolStatus{
			Key: p.key, Warm: len(p.warm), Refilling: p.refilling, Target: p.target, Golden: p.golden,
		})
	}
	slices.SortFunc(out.Pools, func(a, b sandboxd.PoolStatus) int { return cmp.Compare(a.Key.String(), b.Key.String()) })
	for _, sb := range n.sandboxes {
		switch {
		case sb.archived: // its VM is gone from the node, not hibernated
			out.Archived++
		case sb.hibernated:
			out.Hibernated++
		}
		if sb.failed != "" {
			out.Failed++
		}
	}
	out.Templates = n.templateRowsLocked()
	return out
}

// WarmCount is the gossiped warm count for key: what peers see of this
// node. A draining node advertises none.
func (n *Node) WarmCount(key sandbox.PoolKey) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.draining {
		return 0
	}
	if p := n.pools[key.WithDefaults()]; p != nil {
		return len(p.warm)
	}
	return 0
}

// drain cordons the node: warm VMs are destroyed and refill stops; live
// claims keep serving.
func (n *Node) drain(on bool) sandboxd.Info {
	n.mu.Lock()
	n.draining = on
	if on {
		for _, p := range n.pools {
			n.discardWarmLocked(p.warm)
			p.warm = nil
		}
	}
	n.mu.Unlock()
	if !on {
		n.kickRefill()
	}
	return n.info()
}

// WaitWarm blocks until the pool for key has at least want warm VMs or ctx
// ends; tests use it instead of sleeping. It polls on the real clock, not
// the node's: it watches the node's state rather than simulating work, and
// a test that holds a fake node clock still must see a warm pool fill.
func (n *Node) WaitWarm(ctx context.Context, key sandbox.PoolKey, want int) error {
	t := time.NewTicker(2 * time.Millisecond)
	defer t.Stop()
	for {
		if n.WarmCount(key) >= want {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
