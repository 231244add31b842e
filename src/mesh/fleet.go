package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// maxClaimEntries bounds how many nodes one claim enters at. Each entry
// already follows sandboxd's redirects, so more than a few means the
// fleet is out of capacity, not that the next node would help.
const maxClaimEntries = 3

var _ e2b.Fleet = (*Mesh)(nil)

// Claim implements e2b.Fleet: it enters the mesh at the node the entry
// policy picks and lets sandboxd's redirect protocol place the claim
// (sandboxd.Client.Claim follows redirects). A node that cannot be
// reached leaves the view and the next candidate is tried; so is one at
// capacity. A drained fleet is an error wrapping sandboxd.ErrCapacity.
func (m *Mesh) Claim(ctx context.Context, req e2b.ClaimRequest) (e2b.Claimed, error) {
	cref, err := sandbox.NewClaimRef(req.Namespace, req.Name)
	if err != nil {
		return e2b.Claimed{}, fmt.Errorf("mesh: claim: %w", err)
	}
	ref := cref.String()
	key := req.Key.WithDefaults()
	body := sandboxd.ClaimRequest{Template: key.Template, Net: key.Net, Size: key.Size, TTLSeconds: req.TTLSeconds, ClaimRef: ref}

	entries := m.claimEntries(key)
	if len(entries) == 0 {
		return e2b.Claimed{}, errors.New("mesh: claim: no sandboxd node known")
	}
	if len(entries) > maxClaimEntries {
		entries = entries[:maxClaimEntries]
	}
	var errs []error
	for _, addr := range entries {
		c, err := m.at(addr)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cl, err := c.Claim(ctx, body)
		if err == nil {
			id, ok := sandbox.CanonicalID(cl.ID)
			if !ok {
				return e2b.Claimed{}, fmt.Errorf("mesh: claim at %s: node answered a malformed sandbox id", addr)
			}
			owner := cl.OwnerAddr
			m.record(id, owner, ref)
			return e2b.Claimed{
				Sandbox: e2b.Sandbox{
					ID: id, Namespace: req.Namespace, Name: req.Name, Key: key,
					NodeAddr: owner, ClaimedAt: m.cfg.Now(), Deadline: cl.Deadline,
				},
				ClaimToken: cl.Token,
			}, nil
		}
		if ctx.Err() != nil {
			return e2b.Claimed{}, fmt.Errorf("mesh: claim %s: %w", key, ctx.Err())
		}
		if errors.Is(err, sandboxd.ErrBadRequest) || errors.Is(err, sandboxd.ErrConflict) {
			// The body is wrong (an unknown size, an unsupported net)
			// everywhere, not just here.
			return e2b.Claimed{}, fmt.Errorf("mesh: claim %s: %w", key, err)
		}
		if unreachable(ctx, err) {
			m.markDead(addr, err)
		}
		errs = append(errs, err)
	}
	err = errors.Join(errs...)
	if errors.Is(err, sandboxd.ErrCapacity) {
		return e2b.Claimed{}, fmt.Errorf("mesh: claim %s: every node tried is out of capacity: %w", key, err)
	}
	return e2b.Claimed{}, fmt.Errorf("mesh: claim %s: %w", key, err)
}

// claimEntries orders the nodes a claim may enter at.
func (m *Mesh) claimEntries(key sandbox.PoolKey) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := m.liveLocked()
	if len(live) == 0 {
		// Before the first refresh found anyone: the seeds.
		for _, n := range m.nodes {
			live = append(live, n.addr)
		}
		slices.Sort(live)
	}
	if m.cfg.Entry == EntryRoundRobin {
		if len(live) == 0 {
			return nil
		}
		k := int(m.rr % uint64(len(live)))
		m.rr++
		return append(live[k:], live[:k]...)
	}
	type cand struct {
		addr string
		warm int
	}
	var warm []cand
	var cold []string
	for _, a := range live {
		w := 0
		if n := m.nodes[a]; n != nil && n.info != nil && !n.info.Draining {
			if p, ok := n.info.Pool(key); ok {
				w = p.Warm
			}
		}
		if w > 0 {
			warm = append(warm, cand{a, w})
		} else {
			cold = append(cold, a)
		}
	}
	// Power of two choices: two random warm candidates, the warmer first,
	// so concurrent claims spread instead of herding onto the warmest.
	rand.Shuffle(len(warm), func(i, j int) { warm[i], warm[j] = warm[j], warm[i] })
	if len(warm) >= 2 && warm[1].warm > warm[0].warm {
		warm[0], warm[1] = warm[1], warm[0]
	}
	rand.Shuffle(len(cold), func(i, j int) { cold[i], cold[j] = cold[j], cold[i] })
	out := make([]string, 0, len(live))
	for _, c := range warm {
		out = append(out, c.addr)
	}
	return append(out, cold...)
}

// List implements e2b.Fleet: it asks every live node for its index in
// parallel, each within NodeTimeout. A node that does not answer
// contributes nothing (and leaves the view); the others still do.
func (m *Mesh) List(ctx context.Context, namespace string) ([]e2b.Sandbox, error) {
	addrs := m.reachable()
	type answer struct {
		addr string
		rows []sandboxd.Sandbox
		err  error
	}
	answers := make([]answer, len(addrs))
	var wg sync.WaitGroup
	for i, a := range addrs {
		wg.Go(func() {
			answers[i].addr = a
			c, err := m.at(a)
			if err != nil {
				answers[i].err = err
				return
			}
			nctx, cancel := context.WithTimeout(ctx, m.cfg.NodeTimeout)
			defer cancel()
			answers[i].rows, answers[i].err = c.Sandboxes(nctx, "")
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("mesh: list: %w", err)
	}

	var out []e2b.Sandbox
	var errs []error
	answered := 0
	for _, a := range answers {
		if a.err != nil {
			errs = append(errs, a.err)
			if sandboxd.StatusOf(a.err) == 0 {
				m.markDead(a.addr, a.err)
			}
			continue
		}
		answered++
		m.recordRows(a.addr, a.rows)
		for _, r := range a.rows {
			if sb, ok := toSandbox(r, a.addr); ok && (namespace == "" || sb.Namespace == namespace) {
				out = append(out, sb)
			}
		}
	}
	if answered == 0 && len(addrs) > 0 {
		return nil, fmt.Errorf("mesh: list: no sandboxd node answered: %w", errors.Join(errs...))
	}
	slices.SortFunc(out, func(a, b e2b.Sandbox) int {
		return cmp.Or(a.ClaimedAt.Compare(b.ClaimedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Get implements e2b.Fleet: it reads the sandbox from the node the index
// names, or, when the index does not know it (or is wrong), asks every
// live node at once and takes the owner's answer. A sandbox outside
// namespace is ErrNotFound, like one that does not exist.
func (m *Mesh) Get(ctx context.Context, namespace, id string) (e2b.Sandbox, error) {
	canon, ok := sandbox.CanonicalID(id)
	if !ok {
		return e2b.Sandbox{}, e2b.ErrNotFound
	}
	tried := ""
	if e, ok := m.lookup(canon); ok {
		tried = e.addr
		sb, err := m.readAt(ctx, e.addr, canon)
		switch {
		case err == nil:
			return inNamespace(sb, namespace)
		case errors.Is(err, sandboxd.ErrNotFound):
			m.forget(canon)
		case ctx.Err() != nil:
			return e2b.Sandbox{}, fmt.Errorf("mesh: get: %w", ctx.Err())
		}
	}
	sb, err := m.findOwner(ctx, canon, tried)
	if err != nil {
		return e2b.Sandbox{}, err
	}
	return inNamespace(sb, namespace)
}

// findOwner asks every reachable node but skip for the sandbox.
func (m *Mesh) findOwner(ctx context.Context, id, skip string) (e2b.Sandbox, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan e2b.Sandbox, 1)
	var wg sync.WaitGroup
	for _, a := range m.reachable() {
		if a == skip {
			continue
		}
		wg.Go(func() {
			nctx, ncancel := context.WithTimeout(ctx, m.cfg.NodeTimeout)
			defer ncancel()
			sb, err := m.readAt(nctx, a, id)
			if err != nil {
				if unreachable(ctx, err) {
					m.markDead(a, err)
				}
				return
			}
			select {
			case found <- sb:
				cancel() // the owner answered; stop asking the rest
			default:
			}
		})
	}
	wg.Wait()
	select {
	case sb := <-found:
		return sb, nil
	default:
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.Canceled) {
		return e2b.Sandbox{}, fmt.Errorf("mesh: get: %w", err)
	}
	return e2b.Sandbox{}, e2b.ErrNotFound
}

// readAt reads one sandbox from one node with the fleet token: the per-id
// read (root), or, for a token that may not use it, the node's index.
func (m *Mesh) readAt(ctx context.Context, addr, id string) (e2b.Sandbox, error) {
	c, err := m.at(addr)
	if err != nil {
		return e2b.Sandbox{}, err
	}
	row, err := c.Sandbox(ctx, id)
	if errors.Is(err, sandboxd.ErrForbidden) {
		rows, lerr := c.Sandboxes(ctx, "")
		if lerr != nil {
			return e2b.Sandbox{}, lerr
		}
		err = fmt.Errorf("mesh: %s does not list the sandbox: %w", addr, sandboxd.ErrNotFound)
		for i := range rows {
			if rows[i].ID == id {
				row, err = &rows[i], nil
				break
			}
		}
	}
	if err != nil {
		return e2b.Sandbox{}, err
	}
	row.Token = "" // the claim token is read through Node when needed, never kept
	sb, ok := toSandbox(*row, addr)
	if !ok {
		// Claimed without a claim reference: in no namespace at all.
		return e2b.Sandbox{}, fmt.Errorf("mesh: sandbox has no claim reference: %w", sandboxd.ErrNotFound)
	}
	m.record(sb.ID, addr, sb.Namespace+"/"+sb.Name)
	return sb, nil
}

func inNamespace(sb e2b.Sandbox, namespace string) (e2b.Sandbox, error) {
	if namespace != "" && sb.Namespace != namespace {
		return e2b.Sandbox{}, e2b.ErrNotFound
	}
	return sb, nil
}

// toSandbox converts an index row of the node at addr; ok is false for a
// row in no namespace.
func toSandbox(r sandboxd.Sandbox, addr string) (e2b.Sandbox, bool) {
	ref, ok := sandbox.ParseClaimRef(r.ClaimRef)
	if !ok {
		return e2b.Sandbox{}, false
	}
	id, ok := sandbox.CanonicalID(r.ID)
	if !ok {
		return e2b.Sandbox{}, false
	}
	sb := e2b.Sandbox{
		ID: id, Namespace: ref.Namespace, Name: ref.Name, Key: r.Key.WithDefaults(),
		NodeAddr: addr, Deadline: r.Deadline, Paused: r.Hibernated,
	}
	if r.ClaimedAt != nil {
		sb.ClaimedAt = *r.ClaimedAt
	}
	return sb, true
}

// Release implements e2b.Fleet.
func (m *Mesh) Release(ctx context.Context, sb e2b.Sandbox) error {
	err := m.verb(ctx, sb, "release", func(c *sandboxd.Client) error { return c.Release(ctx, sb.ID) })
	if err == nil || errors.Is(err, e2b.ErrNotFound) {
		m.forget(sb.ID)
	}
	return err
}

// Pause implements e2b.Fleet (sandboxd hibernate).
func (m *Mesh) Pause(ctx context.Context, sb e2b.Sandbox) error {
	return m.verb(ctx, sb, "hibernate", func(c *sandboxd.Client) error { return c.Hibernate(ctx, sb.ID) })
}

// Resume implements e2b.Fleet (sandboxd wake).
func (m *Mesh) Resume(ctx context.Context, sb e2b.Sandbox) error {
	return m.verb(ctx, sb, "wake", func(c *sandboxd.Client) error { return c.Wake(ctx, sb.ID) })
}

// Renew implements e2b.Fleet.
func (m *Mesh) Renew(ctx context.Context, sb e2b.Sandbox, ttlSeconds int) (time.Time, error) {
	var deadline time.Time
	err := m.verb(ctx, sb, "renew", func(c *sandboxd.Client) error {
		d, err := c.Renew(ctx, sb.ID, ttlSeconds)
		deadline = d
		return err
	})
	return deadline, err
}

// Node implements e2b.Fleet: a fleet-token client for the owner.
func (m *Mesh) Node(sb e2b.Sandbox) (*sandboxd.Client, error) {
	if sb.NodeAddr == "" {
		return nil, errors.New("mesh: sandbox has no owner address")
	}
	return m.at(sb.NodeAddr)
}

// verb runs one lifecycle call on the owner. The owner answering 404
// (released, reaped) is e2b.ErrNotFound; an owner that cannot be reached
// leaves the view, since its sandboxes died with it.
func (m *Mesh) verb(ctx context.Context, sb e2b.Sandbox, name string, call func(*sandboxd.Client) error) error {
	c, err := m.Node(sb)
	if err != nil {
		return err
	}
	err = call(c)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sandboxd.ErrNotFound):
		m.forget(sb.ID)
		return fmt.Errorf("mesh: %s: %w", name, e2b.ErrNotFound)
	case unreachable(ctx, err):
		m.markDead(sb.NodeAddr, err)
	}
	return fmt.Errorf("mesh: %s: %w", name, err)
}
