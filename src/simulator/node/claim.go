package node

import (
	"context"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// maxRedirectPeers is how many warm peers a redirect names.
const maxRedirectPeers = 2

// grantTTL turns a requested ttl_seconds into the granted lease: 0 is the
// default, anything past the cap is clamped.
func (n *Node) grantTTL(seconds int) (time.Duration, *apiError) {
	if seconds < 0 {
		return 0, errorf(http.StatusBadRequest, "negative ttl_seconds")
	}
	if seconds == 0 {
		return n.cfg.DefaultTTL, nil
	}
	d := time.Duration(seconds) * time.Second
	if d > n.cfg.MaxTTL || d/time.Second != time.Duration(seconds) {
		d = n.cfg.MaxTTL
	}
	return d, nil
}

// admitLocked refuses count new claims for tenant when the node drains or
// the node or tenant is at max_claims.
func (n *Node) admitLocked(tenant string, count int) *apiError {
	if n.draining {
		return errDraining
	}
	if n.cfg.MaxClaims > 0 && len(n.sandboxes)+n.pending+count > n.cfg.MaxClaims {
		return errNodeFull
	}
	if tenant != "" {
		if limit := n.creds.tenantMax(tenant); limit > 0 && n.tenantLive[tenant]+count > limit {
			return errTenantFull
		}
	}
	return nil
}

// claim serves POST /v1/claim for an authenticated caller.
//
// Order: admission (drain, node and tenant caps; a refused non-tenant
// claim may still redirect to a peer), then a clone of a promoted template
// when the claim requires one or no pool serves the key (a pool wins),
// warm hit, peer redirect unless no_redirect, then local provisioning: a
// golden clone for a pooled key, a cold boot otherwise.
func (n *Node) claim(ctx context.Context, c caller, req sandboxd.ClaimRequest) (sandboxd.ClaimResponse, *apiError) {
	key := req.Key()
	if err := n.checkKey(key); err != nil {
		return sandboxd.ClaimResponse{}, err
	}
	lease, aerr := n.grantTTL(req.TTLSeconds)
	if aerr != nil {
		return sandboxd.ClaimResponse{}, aerr
	}
	tenant := c.tenantName()
	start := time.Now()

	n.mu.Lock()
	p := n.pools[key]
	if refusal := n.admitLocked(tenant, 1); refusal != nil {
		n.mu.Unlock()
		if refusal != errTenantFull && !req.NoRedirect {
			if resp, ok := n.peerRedirect(key, !req.RequirePromoted, p == nil); ok {
				return resp, nil
			}
		}
		n.stats.refused.Add(1)
		return sandboxd.ClaimResponse{}, refusal
	}
	if tp := n.templates[key]; req.RequirePromoted || (p == nil && tp != nil) {
		if tp != nil {
			tp.users++ // claimPromoted ends the use
		}
		n.mu.Unlock()
		return n.claimPromoted(ctx, tenant, req, key, tp, p != nil, lease, start)
	}
	if p != nil && len(p.warm) > 0 && n.warmFits(req) {
		vm := p.warm[len(p.warm)-1]
		p.warm = p.warm[:len(p.warm)-1]
		sb := n.newSandboxLocked(key, vm, tenant, labelsOf(req), lease, "")
		resp := n.claimResponse(sb)
		if n.cfg.RefillDelay == 0 {
			// A zero-time clone replaces the VM at once, as the refill
			// loop would; doing it here keeps the pool full under load.
			n.fillInstantlyLocked(p)
		}
		n.mu.Unlock()
		n.kickRefill()
		n.handOver(sb)
		n.stats.claimsWarm.Add(1)
		n.stats.claimNanos.Add(int64(time.Since(start)))
		return resp, nil
	}
	n.mu.Unlock()

	if !req.NoRedirect {
		// Template holders only for an unpooled key: a local pool serves
		// it, as it would win over a template held here.
		if resp, ok := n.peerRedirect(key, true, p == nil); ok {
			return resp, nil
		}
	}

	sb, tier, aerr := n.provision(ctx, key, tenant, labelsOf(req), lease, origin{})
	if aerr != nil {
		return sandboxd.ClaimResponse{}, aerr
	}
	n.handOver(sb)
	n.mu.Lock()
	resp := n.claimResponse(sb)
	n.mu.Unlock()
	tier.Add(1)
	n.stats.claimNanos.Add(int64(time.Since(start)))
	return resp, nil
}

// labels are what a claim records for its caller to find it by: the
// claim_ref and the metadata the sandbox index echoes and filters on.
type labels struct {
	ref      string
	metadata map[string]string
	opts     claimOptions           // checked by the handler (claimOptionsOf)
	volumes  []sandboxd.VolumeMount // applied by the handler (resolveVolumes)
}

func labelsOf(req sandboxd.ClaimRequest) labels {
	return labels{ref: req.ClaimRef, metadata: req.Metadata, opts: claimOptionsOf(req), volumes: req.Volumes}
}

// origin is what a provisioned sandbox's disk starts from: a checkpoint
// (its id is the claim's lineage), a promoted template (the claim carries
// its digest), or neither: a fresh boot.
type origin struct {
	checkpoint string
	template   *promoted
}

// provision boots a sandbox locally outside the lock: a golden clone when
// the key's pool has a golden (RefillDelay), a cold boot otherwise
// (ColdProvisionDelay). The slot is reserved first so concurrent
// provisions cannot overshoot max_claims. Checkpoint branches and template
// clones clone at RefillDelay too.
func (n *Node) provision(ctx context.Context, key sandbox.PoolKey, tenant string, lbl labels, lease time.Duration, src origin) (*claimed, *counter, *apiError) {
	n.mu.Lock()
	if refusal := n.admitLocked(tenant, 1); refusal != nil {
		n.mu.Unlock()
		n.stats.refused.Add(1)
		return nil, nil, refusal
	}
	delay, tier := n.cfg.ColdProvisionDelay, &n.stats.claimsCold
	if p := n.pools[key]; src.checkpoint != "" || src.template != nil || (p != nil && p.golden) {
		delay, tier = n.cfg.RefillDelay, &n.stats.claimsClone
	}
	from := ""
	if ck := n.checkpoints[src.checkpoint]; ck != nil {
		from = ck.dir
	}
	if src.template != nil {
		from = src.template.dir
	}
	n.pending++
	n.mu.Unlock()

	var wm *warmMachine
	if n.cfg.Isolation != nil {
		id := newSandboxID()
		m, err := n.startMachine(ctx, id, key, from, n.machineMounts(lbl.volumes)...)
		if err != nil {
			n.log.Warn("provision: starting the machine failed", "node", n.cfg.Name, "err", err)
			n.mu.Lock()
			n.pending--
			n.mu.Unlock()
			return nil, nil, errorf(http.StatusInternalServerError, "provisioning failed")
		}
		wm = &warmMachine{id: id, m: m}
		defer func() {
			if wm != nil { // not taken by a sandbox
				_ = wm.m.Close()
			}
		}()
	}

	if delay > 0 {
		t := n.cfg.Clock.NewTimer(delay)
		select {
		case <-t.C():
		case <-ctx.Done():
		case <-n.ctx.Done():
		}
		t.Stop()
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	n.pending--
	switch {
	case n.stopping():
		return nil, nil, errorf(http.StatusServiceUnavailable, "node shutting down")
	case ctx.Err() != nil:
		return nil, nil, errorf(http.StatusInternalServerError, "provisioning failed: client gone")
	case n.draining:
		n.stats.refused.Add(1)
		return nil, nil, errDraining
	}
	vm := newVMName()
	if wm != nil {
		n.warmMachines[vm], wm = wm, nil
	}
	sb := n.newSandboxLocked(key, vm, tenant, lbl, lease, src.checkpoint)
	if src.template != nil {
		sb.templateDigest = src.template.rec.ContentDigest
	}
	return sb, tier, nil
}

// newSandboxLocked records a claim of vm under a fresh id and token.
func (n *Node) newSandboxLocked(key sandbox.PoolKey, vm, tenant string, lbl labels, lease time.Duration, fromCheckpoint string) *claimed {
	now := n.cfg.Clock.Now()
	id := newSandboxID()
	wm := n.warmMachines[vm]
	if wm != nil {
		id = wm.id // the machine was started under it (its hostname)
		delete(n.warmMachines, vm)
	}
	sb := &claimed{
		id:             id,
		token:          newToken(),
		vm:             vm,
		key:            key,
		tenant:         tenant,
		claimRef:       lbl.ref,
		metadata:       lbl.metadata,
		fromCheckpoint: fromCheckpoint,
		claimedAt:      now,
		deadline:       now.Add(lease),
		lease:          lease,
		lastActive:     now,
		claimOptions:   lbl.opts,
		volumes:        lbl.volumes,
	}
	n.adoptVolumesLocked(sb)
	if p := n.pools[key]; p != nil {
		sb.idleHibernate = p.idleHibernate
	}
	sb.guests = newGuestSet(n.cfg.Guests, filepath.Join(n.scratch, sb.id), n.log, n.cfg.BodyLimits)
	if wm != nil {
		sb.guests.attach(wm.m, n.cfg.Isolation.ControlPort)
		n.watchMachine(sb, wm.m)
	}
	n.sandboxes[sb.id] = sb
	if tenant != "" {
		n.tenantLive[tenant]++
	}
	return sb
}

func (n *Node) claimResponse(sb *claimed) sandboxd.ClaimResponse {
	return sandboxd.ClaimResponse{
		ID: sb.id, Token: sb.token, Deadline: sb.deadline, OwnerAddr: n.addr,
		TemplateDigest: sb.templateDigest, FromCheckpoint: sb.fromCheckpoint,
		NetRoute: netRoute(sb.key, sb.claimOptions), Volumes: sb.volumes,
	}
}

func (n *Node) claimOf(sb *claimed) sandboxd.Claim {
	return sandboxd.Claim{
		ID: sb.id, Token: sb.token, Deadline: sb.deadline, OwnerAddr: n.addr,
		TemplateDigest: sb.templateDigest, FromCheckpoint: sb.fromCheckpoint,
		// No net_route: a fork child's entry is only id, token, deadline
		// and owner_addr in the contract.
		Volumes: sb.volumes,
	}
}

// peerRedirect names the peers a claim of key may retry at: warm peers
// (when warm), else (when templates) the holders of a promoted template
// for key, with require_promoted set so the retry clones it. The caller
// must not hold n.mu.
func (n *Node) peerRedirect(key sandbox.PoolKey, warm, templates bool) (sandboxd.ClaimResponse, bool) {
	if warm {
		if peers := n.warmPeers(key); len(peers) > 0 {
			n.stats.redirects.Add(1)
			return sandboxd.ClaimResponse{Redirect: peers}, true
		}
	}
	if templates {
		if holders := n.templateHolders(key); len(holders) > 0 {
			n.stats.redirects.Add(1)
			return sandboxd.ClaimResponse{Redirect: holders, RequirePromoted: true}, true
		}
	}
	return sandboxd.ClaimResponse{}, false
}

// warmPeers picks up to two peers that gossip says hold warm VMs for key,
// power-of-two-choices: two random candidates, the warmer first. The
// caller must not hold n.mu.
func (n *Node) warmPeers(key sandbox.PoolKey) []string {
	if n.cfg.Mesh == nil {
		return nil
	}
	type cand struct {
		addr string
		warm int
	}
	var cands []cand
	for _, p := range n.cfg.Mesh.Peers(n) {
		if w := p.WarmCount(key); w > 0 {
			cands = append(cands, cand{p.Addr(), w})
		}
	}
	if len(cands) > maxRedirectPeers {
		rand.Shuffle(len(cands), func(i, j int) { cands[i], cands[j] = cands[j], cands[i] })
		cands = cands[:maxRedirectPeers]
	}
	if len(cands) == 2 && cands[1].warm > cands[0].warm {
		cands[0], cands[1] = cands[1], cands[0]
	}
	out := make([]string, len(cands))
	for i, c := range cands {
		out[i] = c.addr
	}
	return out
}

// peerAddrs is the gossip view of the other members' addresses. The
// caller must not hold n.mu.
func (n *Node) peerAddrs() []string {
	if n.cfg.Mesh == nil {
		return nil
	}
	peers := n.cfg.Mesh.Peers(n)
	out := make([]string, 0, len(peers))
	for _, p := range peers {
		out = append(out, p.Addr())
	}
	return out
}
