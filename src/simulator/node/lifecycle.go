package node

import (
	"cmp"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// sandboxByTokenLocked resolves a sandbox-scoped call: the sandbox's own
// token, or (allowRoot) the configured root token acting by id. Unknown id
// and wrong token are the same 404.
func (n *Node) sandboxByTokenLocked(id, bearer string, allowRoot bool) (*claimed, *apiError) {
	if bearer == "" {
		return nil, errUnauthorized
	}
	sb := n.sandboxes[id]
	if sb == nil {
		return nil, errNotFound
	}
	if tokenEqual(bearer, sb.token) || (allowRoot && n.creds.isRoot(bearer)) {
		return sb, nil
	}
	return nil, errNotFound
}

// removeLocked forgets a sandbox and closes its relays; the caller tears
// the guest and scratch down outside the lock with destroy.
func (n *Node) removeLocked(sb *claimed) {
	delete(n.sandboxes, sb.id)
	if sb.tenant != "" {
		if n.tenantLive[sb.tenant]--; n.tenantLive[sb.tenant] <= 0 {
			delete(n.tenantLive, sb.tenant)
		}
	}
	n.closeRelaysLocked(sb)
	n.dropVolumesLocked(sb.id, sb.volumes)
}

// destroy stops a removed sandbox's guests and deletes its scratch
// directory. It blocks on guest shutdown, so never under n.mu.
func (n *Node) destroy(sb *claimed) {
	sb.guests.destroy()
	_ = os.RemoveAll(filepath.Join(n.scratch, sb.id))
}

func (n *Node) release(id, bearer string) *apiError {
	n.mu.Lock()
	sb, err := n.sandboxByTokenLocked(id, bearer, true)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	n.removeLocked(sb)
	n.mu.Unlock()
	n.destroy(sb)
	n.stats.releases.Add(1)
	n.kickRefill() // capacity freed
	return nil
}

func (n *Node) hibernate(id, bearer string) *apiError {
	n.mu.Lock()
	sb, err := n.sandboxByTokenLocked(id, bearer, true)
	if err == nil {
		err = staysLive(sb, "hibernate")
	}
	if err == nil {
		err = refuseFailed(sb, "hibernate")
	}
	if err != nil {
		n.mu.Unlock()
		return err
	}
	already := sb.hibernated
	if !already {
		n.hibernateLocked(sb)
	}
	n.mu.Unlock()
	if !already {
		sb.guests.stop() // the VM stops: its listeners and connections go
	}
	return nil
}

// hibernateLocked marks the sandbox stopped and cuts its relays; the
// caller stops the guests outside the lock.
func (n *Node) hibernateLocked(sb *claimed) {
	sb.hibernated = true
	n.closeRelaysLocked(sb)
	n.stats.hibernates.Add(1)
}

func (n *Node) wake(id, bearer string) *apiError {
	n.mu.Lock()
	sb, err := n.sandboxByTokenLocked(id, bearer, true)
	if err != nil {
		n.mu.Unlock()
		return err
	}
	if sb.failed != "" {
		n.mu.Unlock()
		return n.rebootFailed(sb)
	}
	n.resumeLocked(sb) // an archived sandbox gets a fresh lease
	n.mu.Unlock()
	return nil
}

// wakeLocked restores a hibernated sandbox; it keeps its deadline. Guests
// restart on the next relay.
func (n *Node) wakeLocked(sb *claimed) {
	if !sb.hibernated {
		return
	}
	start := time.Now()
	sb.guests.wake()
	sb.hibernated = false
	sb.lastActive = n.cfg.Clock.Now()
	n.stats.wakes.Add(1)
	n.stats.wakeNanos.Add(int64(time.Since(start)))
}

// renew resets the lease and, when onExpire is set, switches the expiry
// action. An archived sandbox is refused: its deadline is the archive's
// retention, which a lease must not overwrite.
func (n *Node) renew(id, bearer string, ttlSeconds int, onExpire string) (time.Time, *apiError) {
	lease, aerr := n.grantTTL(ttlSeconds)
	n.mu.Lock()
	defer n.mu.Unlock()
	sb, err := n.sandboxByTokenLocked(id, bearer, true)
	if err == nil && !n.creds.isRoot(bearer) && n.tenantRemovedLocked(sb) {
		err = errTenantRemoved // root still renews it
	}
	if err != nil {
		return time.Time{}, err
	}
	if aerr == nil {
		aerr = checkOnExpire(onExpire, sb.key, sb.volumes)
	}
	if aerr == nil && sb.archived {
		aerr = errorf(http.StatusConflict, "renew: the sandbox is archived; wake it first")
	}
	if aerr != nil {
		return time.Time{}, aerr
	}
	if onExpire != "" {
		sb.onExpire = onExpire
	}
	sb.lease = lease
	sb.deadline = n.cfg.Clock.Now().Add(lease)
	n.stats.renews.Add(1)
	return sb.deadline, nil
}

// parentLocked resolves the sandbox behind a fork, checkpoint or promote: the body
// token proves ownership; the root token with an empty body token acts by
// id as the operator.
func (n *Node) parentLocked(c caller, id, bodyToken string) (*claimed, *apiError) {
	sb := n.sandboxes[id]
	if sb == nil {
		return nil, errNotFound
	}
	if tokenEqual(bodyToken, sb.token) || (bodyToken == "" && c.kind == callerRoot) {
		return sb, nil
	}
	return nil, errNotFound
}

// staysLive refuses the verbs that snapshot a sandbox on the egress lane.
// sandboxd keeps those guests live from claim to release: a resume from a
// snapshot would run the guest before its fresh NIC is locked again, so
// hibernate, fork, checkpoint (and promote) answer 409 there. A sandbox
// with volumes attached is refused the same verbs: its disks cannot be
// captured with it, and a resumed copy would hold a volume twice.
func staysLive(sb *claimed, verb string) *apiError {
	if sb.key.Net == netEgress {
		return errorf(http.StatusConflict, "%s: egress-lane sandboxes stay live (no hibernate, fork, checkpoint or promote)", verb)
	}
	if len(sb.volumes) > 0 {
		return errorf(http.StatusConflict, "%s: sandboxes with volumes attached stay live (no hibernate, fork, checkpoint or promote)", verb)
	}
	return nil
}

func (n *Node) fork(c caller, id string, req sandboxd.ForkRequest) ([]sandboxd.Claim, *apiError) {
	if req.Count < 1 || req.Count > n.cfg.MaxForkCount {
		return nil, errorf(http.StatusBadRequest, "count must be 1-%d", n.cfg.MaxForkCount)
	}
	lease, aerr := n.grantTTL(req.TTLSeconds)
	if aerr != nil {
		return nil, aerr
	}
	n.mu.Lock()
	parent, aerr := n.parentLocked(c, id, req.Token)
	if aerr == nil && req.Token != "" && n.tenantRemovedLocked(parent) {
		aerr = errTenantRemoved // the sandbox's own token; root by id still forks
	}
	if aerr == nil {
		aerr = staysLive(parent, "fork")
	}
	if aerr == nil {
		aerr = refuseArchived(parent, "fork")
	}
	if aerr == nil {
		aerr = refuseFailed(parent, "fork")
	}
	if aerr == nil {
		aerr = checkOnExpire(req.OnExpire, parent.key, parent.volumes)
	}
	if aerr != nil {
		n.mu.Unlock()
		return nil, aerr
	}
	// Children inherit the parent's on_expire and "egress": false; the
	// body's on_expire overrides the inherited action. The claim env is
	// not inherited: the contract names no such edge.
	childOpts := claimOptions{onExpire: cmp.Or(req.OnExpire, parent.onExpire), noEgress: parent.noEgress}
	// Children count against the parent's tenant, whoever calls.
	if aerr := n.admitLocked(parent.tenant, req.Count); aerr != nil {
		n.mu.Unlock()
		n.stats.refused.Add(1)
		return nil, aerr
	}
	children := make([]*claimed, 0, req.Count)
	for range req.Count {
		// Children inherit the parent's metadata (sandboxd's current
		// fork): the map is never written after a claim, so it is shared.
		child := n.newSandboxLocked(parent.key, newVMName(), parent.tenant, labels{metadata: parent.metadata, opts: childOpts}, lease, "")
		if req.ClaimRefPrefix != "" {
			child.claimRef = req.ClaimRefPrefix + child.id
		}
		child.idleHibernate = parent.idleHibernate
		children = append(children, child)
	}
	out := make([]sandboxd.Claim, len(children))
	for i, ch := range children {
		out[i] = n.claimOf(ch)
	}
	parentDir := filepath.Join(n.scratch, parent.id)
	parentGuests := parent.guests
	n.mu.Unlock()

	// Disk state duplicates at the fork point: a machine's layer, which
	// each child's machine boots from, or the in-process guest's scratch.
	if parentGuests.machine != nil {
		if err := n.forkMachines(n.ctx, parentGuests, children); err != nil {
			for _, ch := range children {
				n.mu.Lock()
				n.removeLocked(ch)
				n.mu.Unlock()
				n.destroy(ch)
			}
			n.log.Warn("fork: starting the children failed", "node", n.cfg.Name, "err", err)
			return nil, errorf(http.StatusInternalServerError, "fork failed")
		}
	} else {
		for _, ch := range children {
			if err := copyTreeIfExists(parentDir, filepath.Join(n.scratch, ch.id)); err != nil {
				n.log.Warn("fork: copy scratch failed", "node", n.cfg.Name, "child", ch.id, "err", err)
			}
		}
	}
	n.stats.forks.Add(1)
	n.stats.forkChildren.Add(int64(len(children)))
	return out, nil
}

// ReapExpired reaps every sandbox whose lease ended by the node clock and
// hibernates idle ones of pools with idle_hibernate_seconds; it returns
// how many it reaped. The reap loop calls it every ReapInterval; tests
// with an injected clock call it directly.
func (n *Node) ReapExpired() int {
	now := n.cfg.Clock.Now()
	var reaped, hibernated []*claimed
	n.mu.Lock()
	for _, sb := range n.sandboxes {
		switch {
		case leaseEnded(sb, now):
			// on_expire archive hibernates and archives instead; an
			// archive whose retention ended is deleted.
			destroy, stop := n.expireLocked(sb, now)
			switch {
			case destroy:
				n.removeLocked(sb)
				reaped = append(reaped, sb)
			case stop:
				hibernated = append(hibernated, sb)
			}
		case sb.idleHibernate > 0 && sb.key.Net != netEgress && len(sb.volumes) == 0 && !sb.hibernated && sb.failed == "" && sb.openRelays == 0 && now.Sub(sb.lastActive) >= sb.idleHibernate:
			n.hibernateLocked(sb)
			hibernated = append(hibernated, sb)
		}
	}
	n.mu.Unlock()
	for _, sb := range reaped {
		n.destroy(sb)
	}
	for _, sb := range hibernated {
		sb.guests.stop()
	}
	if len(reaped) > 0 {
		n.stats.reaps.Add(int64(len(reaped)))
		n.kickRefill()
	}
	return len(reaped)
}

// reapLoop reaps every tick of t, which Start makes before the loop runs
// so that a test's first step of a fake clock already reaches it.
func (n *Node) reapLoop(t clock.Ticker) {
	defer t.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C():
			n.ReapExpired()
		}
	}
}

// stats answers GET /v1/sandboxes/{id}/stats.
func (n *Node) sandboxStats(id string) (sandboxd.Stats, *apiError) {
	n.mu.Lock()
	defer n.mu.Unlock()
	sb := n.sandboxes[id]
	if sb == nil {
		return sandboxd.Stats{}, errNotFound
	}
	tier := n.cfg.Sizes[sb.key.Size]
	st := sandboxd.Stats{
		ID:            sb.id,
		CPUCount:      tier.CPUCount,
		MemTotalBytes: tier.MemoryBytes(),
		Hibernated:    sb.hibernated,
		MeasuredAt:    n.cfg.Clock.Now().UTC(),
	}
	if !sb.hibernated && sb.failed == "" {
		// No VMM to read: report a stable fraction so callers see a
		// plausible, measured value.
		st.MemUsedBytes = tier.MemoryBytes() / 6
		st.MemUsedMeasured = true
	}
	return st, nil
}
