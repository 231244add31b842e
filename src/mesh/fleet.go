package mesh

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

var (
	_ fleet.View     = (*Mesh)(nil)
	_ fleet.Recorder = (*Mesh)(nil)
)

// Nodes implements fleet.View: the live nodes that are not draining, with
// the warm counts of their last /v1/info, or, before the first refresh
// found anyone, the seeds (a claim then learns by sandboxd's redirects).
func (m *Mesh) Nodes() []fleet.Node {
	m.mu.RLock()
	defer m.mu.RUnlock()
	live := m.liveLocked()
	if len(live) == 0 {
		for _, n := range m.nodes {
			live = append(live, n.addr)
		}
		slices.Sort(live)
	}
	out := make([]fleet.Node, 0, len(live))
	for _, a := range live {
		fn := fleet.Node{Name: a, Addr: a, Warm: map[sandbox.PoolKey]int{}}
		if n := m.nodes[a]; n != nil && n.info != nil {
			if n.info.Draining {
				continue
			}
			for _, p := range n.info.Pools {
				fn.Warm[p.Key.WithDefaults()] += p.Warm
			}
		}
		out = append(out, fn)
	}
	return out
}

// Claimed implements fleet.Recorder: the index routes to the new sandbox
// before the next refresh lists it.
func (m *Mesh) Claimed(sb fleet.Sandbox) { m.record(sb.ID, sb.NodeAddr, sb.ClaimRef.String()) }

// Changed implements fleet.Recorder; the mesh reads every sandbox from its
// owner, so there is nothing to lay over.
func (m *Mesh) Changed(fleet.Sandbox) {}

// Released implements fleet.Recorder.
func (m *Mesh) Released(sb fleet.Sandbox) { m.forget(sb.ID) }

// Unreachable implements fleet.Recorder: the node leaves the live set
// until a refresh reaches it again.
func (m *Mesh) Unreachable(addr string, err error) { m.markDead(addr, err) }

// List implements fleet.View: it asks every live node for its index in
// parallel, each within NodeTimeout. A node that does not answer
// contributes nothing (and leaves the view); the others still do.
func (m *Mesh) List(ctx context.Context, namespace string) ([]fleet.Sandbox, error) {
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

	var out []fleet.Sandbox
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
	slices.SortFunc(out, func(a, b fleet.Sandbox) int {
		return cmp.Or(a.ClaimedAt.Compare(b.ClaimedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// Find implements fleet.View: it reads the sandbox from the node the index
// names, or, when the index does not know it (or is wrong), asks every
// live node at once and takes the owner's answer. A sandbox outside
// namespace is ErrNotFound, like one that does not exist.
func (m *Mesh) Find(ctx context.Context, namespace, id string) (fleet.Sandbox, error) {
	canon, ok := sandbox.CanonicalID(id)
	if !ok {
		return fleet.Sandbox{}, fleet.ErrNotFound
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
			return fleet.Sandbox{}, fmt.Errorf("mesh: get: %w", ctx.Err())
		}
	}
	sb, err := m.findOwner(ctx, canon, tried)
	if err != nil {
		return fleet.Sandbox{}, err
	}
	return inNamespace(sb, namespace)
}

// findOwner asks every reachable node but skip for the sandbox.
func (m *Mesh) findOwner(ctx context.Context, id, skip string) (fleet.Sandbox, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	found := make(chan fleet.Sandbox, 1)
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
		return fleet.Sandbox{}, fmt.Errorf("mesh: get: %w", err)
	}
	return fleet.Sandbox{}, fleet.ErrNotFound
}

// readAt reads one sandbox from one node with the fleet token: the per-id
// read (root), or, for a token that may not use it, the node's index.
func (m *Mesh) readAt(ctx context.Context, addr, id string) (fleet.Sandbox, error) {
	c, err := m.at(addr)
	if err != nil {
		return fleet.Sandbox{}, err
	}
	row, err := c.Sandbox(ctx, id)
	if errors.Is(err, sandboxd.ErrForbidden) {
		rows, lerr := c.Sandboxes(ctx, "")
		if lerr != nil {
			return fleet.Sandbox{}, lerr
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
		return fleet.Sandbox{}, err
	}
	row.Token = "" // the claim token is read through Node when needed, never kept
	sb, ok := toSandbox(*row, addr)
	if !ok {
		// Claimed without a claim reference: in no namespace at all.
		return fleet.Sandbox{}, fmt.Errorf("mesh: sandbox has no claim reference: %w", sandboxd.ErrNotFound)
	}
	m.record(sb.ID, addr, sb.Namespace+"/"+sb.Name)
	return sb, nil
}

func inNamespace(sb fleet.Sandbox, namespace string) (fleet.Sandbox, error) {
	if namespace != "" && sb.Namespace != namespace {
		return fleet.Sandbox{}, fleet.ErrNotFound
	}
	return sb, nil
}

// toSandbox converts an index row of the node at addr; ok is false for a
// row in no namespace.
func toSandbox(r sandboxd.Sandbox, addr string) (fleet.Sandbox, bool) {
	ref, ok := sandbox.ParseClaimRef(r.ClaimRef)
	if !ok {
		return fleet.Sandbox{}, false
	}
	id, ok := sandbox.CanonicalID(r.ID)
	if !ok {
		return fleet.Sandbox{}, false
	}
	sb := fleet.Sandbox{
		ID: id, ClaimRef: ref, Key: r.Key.WithDefaults(),
		Node: addr, NodeAddr: addr, Deadline: r.Deadline, Paused: r.Hibernated,
		Failed: r.Failed, Metadata: r.Metadata,
	}
	if r.ClaimedAt != nil {
		sb.ClaimedAt = *r.ClaimedAt
	}
	return sb, true
}
