package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Backoff of the re-checks for a claim a node may grant late.
const (
	orphanFirstWait = 250 * time.Millisecond
	orphanMaxWait   = 5 * time.Second
)

// maxRedirectEntries bounds how many nodes a redirect-following claim
// enters at: each entry already follows the node's redirects, so more
// than a few failing means the fleet is out of capacity.
const maxRedirectEntries = 3

// Claim claims a warm sandbox from req.Key's pool under req.Ref, on the
// nodes Order picks, moving on when a node refuses or does not answer. It
// returns the sandbox and its token in one call. A fleet with no warm VM
// for the key is an error wrapping sandboxd.ErrCapacity; one whose
// candidate nodes could not be reached wraps sandboxd.ErrUnavailable.
func (f *Fleet) Claim(ctx context.Context, req ClaimRequest) (Claimed, error) {
	if f.cfg.ClaimObserver == nil {
		return f.claim(ctx, req)
	}
	start := f.cfg.Clock.Now()
	c, err := f.claim(ctx, req)
	f.cfg.ClaimObserver.ObserveClaim(req.Front, req.Key.WithDefaults(), f.cfg.Clock.Since(start), err)
	return c, err
}

// claim is Claim without the observer.
func (f *Fleet) claim(ctx context.Context, req ClaimRequest) (Claimed, error) {
	if _, err := sandbox.NewClaimRef(req.Ref.Namespace, req.Ref.Name); err != nil {
		return Claimed{}, fmt.Errorf("fleet: claim: %w: %w", ErrInvalid, err)
	}
	key := req.Key.WithDefaults()
	all := f.cfg.View.Nodes()
	f.randMu.Lock()
	nodes := Order(all, key, f.cfg.FollowRedirects, f.rng)
	if req.Promoted {
		nodes = holders(all, req.At, f.rng)
	}
	f.randMu.Unlock()
	nodes = f.unanswered.last(nodes, f.cfg.Clock.Now())
	if f.cfg.FollowRedirects && len(nodes) > maxRedirectEntries {
		nodes = nodes[:maxRedirectEntries]
	}
	if len(nodes) == 0 {
		if req.Promoted {
			return Claimed{}, fmt.Errorf("fleet: no node holds template %s: %w", key, ErrNoTemplate)
		}
		return Claimed{}, fmt.Errorf("fleet: no node has a warm sandbox for %s now: %w", key, sandboxd.ErrCapacity)
	}
	if err := ValidateMetadata(req.Metadata); err != nil {
		return Claimed{}, fmt.Errorf("fleet: claim: %w: %w", ErrInvalid, err)
	}
	attempt := newAttempt()
	body := sandboxd.ClaimRequest{
		Template: key.Template, Net: key.Net, Size: key.Size, TTLSeconds: max(req.TTLSeconds, 0),
		ClaimRef: req.Ref.String(), NoRedirect: !f.cfg.FollowRedirects, RequirePromoted: req.Promoted,
		Metadata: withAttempt(req.Metadata, attempt), OnExpire: req.OnExpire, Volumes: req.Volumes,
	}
	if req.NoEgress {
		body.Egress = new(bool)
	}
	var capacity, gone, other int
	var last error
	for _, n := range nodes {
		if err := ctx.Err(); err != nil {
			return Claimed{}, fmt.Errorf("fleet: claim %s: %w", key, err)
		}
		cl, err := f.claimAt(ctx, n.Addr, body)
		if err == nil {
			f.heardFrom(n.Addr)
			sb := Sandbox{
				ID: cl.ID, ClaimRef: req.Ref, Key: key,
				Node: nodeName(all, cl.OwnerAddr, n), NodeAddr: cl.OwnerAddr,
				ClaimedAt: f.cfg.Clock.Now(), Deadline: cl.Deadline, Metadata: req.Metadata,
			}
			if f.rec != nil {
				f.rec.Claimed(sb)
			}
			return Claimed{Sandbox: sb, Token: cl.Token}, nil
		}
		last = err
		switch {
		case errors.Is(err, sandboxd.ErrBadRequest), errors.Is(err, sandboxd.ErrConflict):
			// The body is wrong (an unknown size, an unsupported net)
			// everywhere, not just here.
			return Claimed{}, fmt.Errorf("fleet: claim %s: %w", key, err)
		case errors.Is(err, sandboxd.ErrCapacity):
			capacity++
		case req.Promoted && errors.Is(err, sandboxd.ErrNotFound):
			// The holder no longer has the template (deleted or replaced
			// since the catalog was read); another holder may.
			gone++
		default:
			// No answer, a timeout or a server error: the node may still
			// have granted the claim. Release whatever it holds under
			// this reference so a retry elsewhere leaves no twin.
			other++
			f.log.Info("Claim failed on a node, trying the next", "node", n.Name, "claimRef", body.ClaimRef, "err", err)
			if unreachable(ctx, err) {
				f.silentNode(n.Addr, err)
			}
			f.releaseOrphans(n.Addr, body.ClaimRef, attempt, time.Duration(body.TTLSeconds)*time.Second)
		}
	}
	if err := ctx.Err(); err != nil {
		return Claimed{}, fmt.Errorf("fleet: claim %s: %w", key, err)
	}
	if gone == len(nodes) {
		return Claimed{}, fmt.Errorf("fleet: no node holds template %s any more: %w", key, ErrNoTemplate)
	}
	if capacity == 0 && other > 0 {
		return Claimed{}, fmt.Errorf("fleet: no node with warm capacity for %s could be reached: %w: %w", key, sandboxd.ErrUnavailable, last)
	}
	return Claimed{}, fmt.Errorf("fleet: every node tried for %s is out of capacity: %w", key, sandboxd.ErrCapacity)
}

// holders are the nodes at addrs, in random order: a promoted template has
// no warm count to prefer one holder by. An address the view does not
// know (a mesh member not yet seen) is entered by its address alone.
func holders(nodes []Node, addrs []string, rng *rand.Rand) []Node {
	out := make([]Node, 0, len(addrs))
	for _, addr := range addrs {
		n := Node{Name: addr, Addr: addr}
		for _, known := range nodes {
			if known.Addr == addr {
				n = known
				break
			}
		}
		out = append(out, n)
	}
	rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// claimAt makes one claim at one node within NodeTimeout.
func (f *Fleet) claimAt(ctx context.Context, addr string, body sandboxd.ClaimRequest) (*sandboxd.Claim, error) {
	c, err := f.Client(addr)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.NodeTimeout)
	defer cancel()
	var cl *sandboxd.Claim
	if f.cfg.FollowRedirects {
		cl, err = c.Claim(ctx, body)
	} else {
		var resp *sandboxd.ClaimResponse
		resp, err = c.ClaimNoFollow(ctx, body)
		if err == nil {
			if resp.IsRedirect() || resp.ID == "" || resp.Token == "" {
				// A node must not redirect a no_redirect claim; take it
				// as a refusal rather than follow it.
				return nil, fmt.Errorf("node %s answered a no_redirect claim without a grant: %w", addr, sandboxd.ErrCapacity)
			}
			cl = &sandboxd.Claim{ID: resp.ID, Token: resp.Token, Deadline: resp.Deadline, OwnerAddr: resp.OwnerAddr}
		}
	}
	if err != nil {
		return nil, err
	}
	id, ok := sandbox.CanonicalID(cl.ID)
	if !ok {
		return nil, fmt.Errorf("node %s answered a malformed sandbox id", addr)
	}
	cl.ID, cl.OwnerAddr = id, cmp.Or(cl.OwnerAddr, addr)
	return cl, nil
}

// nodeName names the node that owns a claim made at entry: the entry
// itself, the view's node at the owner's address after a redirect, or the
// address alone.
func nodeName(nodes []Node, owner string, entry Node) string {
	if owner == entry.Addr {
		return entry.Name
	}
	for _, n := range nodes {
		if n.Addr == owner {
			return n.Name
		}
	}
	return owner
}

// releaseOrphans releases, in the background, every sandbox the node at
// addr holds under ref from this claim attempt (AttemptLabel): a claim the
// node may have granted after this process stopped waiting for it. A hung node (one that stopped answering,
// SIGSTOPped or stalled) may grant the claim only once it runs again, so
// the check repeats with backoff until two answers at least NodeTimeout
// apart showed nothing left, or until lease (the claim's TTL), when the
// node's own reaper frees whatever is left, or until Close.
func (f *Fleet) releaseOrphans(addr, ref, attempt string, lease time.Duration) {
	c, err := f.Client(addr)
	if err != nil {
		return
	}
	giveUp := f.cfg.Clock.Now().Add(cmp.Or(lease, sandboxd.DefaultTTL))
	f.bg.Go(func() {
		var clearSince time.Time
		for wait := orphanFirstWait; ; wait = min(2*wait, orphanMaxWait) {
			found, err := f.releaseOrphansOnce(c, ref, attempt)
			if unreachable(context.Background(), err) {
				f.silentNode(addr, err)
			} else {
				f.heardFrom(addr)
			}
			now := f.cfg.Clock.Now()
			switch {
			case err != nil || found > 0:
				clearSince = time.Time{}
			case clearSince.IsZero():
				clearSince = now
			case now.Sub(clearSince) >= f.cfg.NodeTimeout:
				return
			}
			if now.After(giveUp) {
				f.log.Info("Gave up releasing a possibly orphaned claim; its lease ends it", "claimRef", ref, "err", err)
				return
			}
			select {
			case <-f.done:
				return
			case <-f.cfg.Clock.After(wait):
			}
		}
	})
}

// releaseOrphansOnce lists and releases the attempt's sandboxes at one
// node within NodeTimeout, and says how many it found.
func (f *Fleet) releaseOrphansOnce(c *sandboxd.Client, ref, attempt string) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.NodeTimeout)
	defer cancel()
	list, err := c.SandboxesMatching(ctx, ref, map[string]string{AttemptLabel: attempt})
	if err != nil {
		f.log.Debug("Could not check a node for an orphaned claim", "claimRef", ref, "err", err)
		return 0, err
	}
	found := 0
	for _, sb := range list {
		if sb.ClaimRef != ref || sb.Metadata[AttemptLabel] != attempt {
			continue
		}
		found++
		if err := c.Release(ctx, sb.ID); err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
			f.log.Info("Could not release an orphaned claim", "claimRef", ref, "err", err)
			return found, err
		}
	}
	return found, nil
}
