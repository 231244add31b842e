package fleet

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// List returns the sandboxes of namespace ("" is every namespace).
func (f *Fleet) List(ctx context.Context, namespace string) ([]Sandbox, error) {
	return f.cfg.View.List(ctx, namespace)
}

// Find returns the sandbox with id (in either spelling) in namespace, or
// an error wrapping ErrNotFound, for a sandbox of another namespace too.
func (f *Fleet) Find(ctx context.Context, namespace, id string) (Sandbox, error) {
	canon, ok := sandbox.CanonicalID(id)
	if !ok {
		return Sandbox{}, ErrNotFound
	}
	return f.cfg.View.Find(ctx, namespace, canon)
}

// Release releases sb on its node. A sandbox its node no longer knows
// (reaped at its deadline, released elsewhere) wraps ErrNotFound; either
// way the view stops showing it.
func (f *Fleet) Release(ctx context.Context, sb Sandbox) (err error) {
	defer f.observeOperation(OperationRelease, f.cfg.Clock.Now(), &err)
	err = f.call(ctx, sb, "release", func(ctx context.Context, c *sandboxd.Client) error { return c.Release(ctx, sb.ID) })
	if (err == nil || errors.Is(err, ErrNotFound)) && f.rec != nil {
		f.rec.Released(sb)
	}
	return err
}

// Pause hibernates sb (idempotent).
func (f *Fleet) Pause(ctx context.Context, sb Sandbox) (err error) {
	defer f.observeOperation(OperationPause, f.cfg.Clock.Now(), &err)
	return f.change(ctx, sb, "hibernate", func(ctx context.Context, c *sandboxd.Client) error { return c.Hibernate(ctx, sb.ID) },
		func(sb *Sandbox) { sb.Paused = true })
}

// Resume wakes sb (idempotent).
func (f *Fleet) Resume(ctx context.Context, sb Sandbox) (err error) {
	defer f.observeOperation(OperationResume, f.cfg.Clock.Now(), &err)
	return f.change(ctx, sb, "wake", func(ctx context.Context, c *sandboxd.Client) error { return c.Wake(ctx, sb.ID) },
		func(sb *Sandbox) { sb.Paused = false })
}

// Renew sets sb's lease to ttlSeconds from now and returns the deadline
// the node granted. The view's recorder is told sb with the new deadline,
// so sb must be current: after a Pause or Resume, pass the sandbox with
// Paused set as it now is, not the copy from before.
func (f *Fleet) Renew(ctx context.Context, sb Sandbox, ttlSeconds int) (time.Time, error) {
	return f.RenewWith(ctx, sb, Renewal{TTLSeconds: ttlSeconds})
}

// Renewal is a renew's terms.
type Renewal struct {
	// TTLSeconds is the new lease from now; 0 takes the node's default.
	TTLSeconds int
	// OnExpire switches what the node does at the lease's end
	// (sandboxd.ExpireDestroy or sandboxd.ExpireArchive); empty keeps it.
	OnExpire string
}

// RenewWith renews sb's lease on the terms of r; see Renew.
func (f *Fleet) RenewWith(ctx context.Context, sb Sandbox, r Renewal) (_ time.Time, err error) {
	defer f.observeOperation(OperationRenew, f.cfg.Clock.Now(), &err)
	var deadline time.Time
	err = f.change(ctx, sb, "renew", func(ctx context.Context, c *sandboxd.Client) error {
		var err error
		deadline, err = c.RenewWith(ctx, sb.ID, sandboxd.RenewRequest{TTLSeconds: r.TTLSeconds, OnExpire: r.OnExpire})
		return err
	}, func(sb *Sandbox) { sb.Deadline = deadline })
	return deadline, err
}

// Fork makes count children of parent on its node, each with the lease
// ttlSeconds (0 = the node's default), named "<parent>-fork-sb-…" in the
// parent's namespace (sandbox.ForkPrefix).
func (f *Fleet) Fork(ctx context.Context, parent Sandbox, count, ttlSeconds int) (_ []Claimed, err error) {
	defer f.observeOperation(OperationFork, f.cfg.Clock.Now(), &err)
	if parent.ClaimRef.IsZero() {
		return nil, fmt.Errorf("fleet: fork: %w: the sandbox belongs to no namespace", ErrInvalid)
	}
	if err := sandbox.CheckFork(parent.ClaimRef, parent.ID, count); err != nil {
		return nil, fmt.Errorf("fleet: fork: %w: %w", ErrInvalid, err)
	}
	if ttlSeconds < 0 {
		return nil, fmt.Errorf("fleet: fork: %w: ttlSeconds must not be negative, got %d", ErrInvalid, ttlSeconds)
	}
	prefix := sandbox.ForkPrefix(parent.ClaimRef)
	var children []sandboxd.Claim
	err = f.callCopying(ctx, parent, "fork", func(ctx context.Context, c *sandboxd.Client) error {
		var err error
		children, err = c.Fork(ctx, parent.ID, sandboxd.ForkRequest{Count: count, TTLSeconds: ttlSeconds, ClaimRefPrefix: prefix})
		return err
	})
	if err != nil {
		return nil, err
	}
	now := f.cfg.Clock.Now()
	out := make([]Claimed, 0, len(children))
	for _, c := range children {
		ref, refOK := sandbox.ParseClaimRef(prefix + c.ID)
		id, idOK := sandbox.CanonicalID(c.ID)
		if !refOK || !idOK {
			// The node named a child no front can address; it still
			// exists under its claim ref and expires with its lease.
			continue
		}
		sb := Sandbox{
			ID: id, ClaimRef: ref, Key: parent.Key, Node: parent.Node, NodeAddr: parent.NodeAddr,
			ClaimedAt: now, Deadline: c.Deadline,
		}
		if c.OwnerAddr != "" {
			sb.NodeAddr = c.OwnerAddr
		}
		if f.rec != nil {
			f.rec.Claimed(sb)
		}
		out = append(out, Claimed{Sandbox: sb, Token: c.Token})
	}
	return out, nil
}

// Checkpoint checkpoints sb on its node under name (may be empty).
func (f *Fleet) Checkpoint(ctx context.Context, sb Sandbox, name string) (_ *sandboxd.Checkpoint, err error) {
	defer f.observeOperation(OperationCheckpoint, f.cfg.Clock.Now(), &err)
	var ck *sandboxd.Checkpoint
	err = f.callCopying(ctx, sb, "checkpoint", func(ctx context.Context, c *sandboxd.Client) error {
		var err error
		ck, err = c.Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{Name: name})
		return err
	})
	return ck, err
}

// Token reads sb's own token back from its node, which answers it to the
// root token only: how a replica that did not make the claim derives the
// e2b access token without any store.
func (f *Fleet) Token(ctx context.Context, sb Sandbox) (string, error) {
	row, err := f.Row(ctx, sb)
	if err != nil {
		return "", err
	}
	if row.Token == "" {
		return "", fmt.Errorf("fleet: read token: %w", errNoToken)
	}
	return row.Token, nil
}

// errNoToken is a node that answered a root read without the sandbox's
// token: the fleet's token is not the node's root api_token.
var errNoToken = errors.New("the node answered without the sandbox's token; the fleet token must be the nodes' root api_token")

// Row reads sb's row off its node: its state now (traffic may have woken
// it, the node may have archived it at its timeout), its lease, expiry
// action and volumes, and its own token. A sandbox its node no longer
// holds wraps ErrNotFound.
func (f *Fleet) Row(ctx context.Context, sb Sandbox) (*sandboxd.Sandbox, error) {
	var row *sandboxd.Sandbox
	err := f.call(ctx, sb, "read", func(ctx context.Context, c *sandboxd.Client) error {
		var err error
		row, err = c.Sandbox(ctx, sb.ID)
		return err
	})
	return row, err
}

// Current is sb as its node has it now: paused when hibernated or
// archived, with the node's deadline. See Row.
func (f *Fleet) Current(ctx context.Context, sb Sandbox) (Sandbox, *sandboxd.Sandbox, error) {
	row, err := f.Row(ctx, sb)
	if err != nil {
		return sb, nil, err
	}
	sb.Paused = row.Hibernated || row.Archived
	sb.Failed = row.Failed
	if !row.Deadline.IsZero() {
		sb.Deadline = row.Deadline
	}
	return sb, row, nil
}

// change runs a verb that changes sb in place and tells the view.
func (f *Fleet) change(ctx context.Context, sb Sandbox, op string, verb func(context.Context, *sandboxd.Client) error, apply func(*Sandbox)) error {
	if err := f.call(ctx, sb, op, verb); err != nil {
		if errors.Is(err, ErrNotFound) && f.rec != nil {
			f.rec.Released(sb)
		}
		return err
	}
	apply(&sb)
	if f.rec != nil {
		f.rec.Changed(sb)
	}
	return nil
}

// call runs one verb on sb's node within NodeTimeout. The node answering
// 404 wraps ErrNotFound as well as sandboxd.ErrNotFound; a node that does
// not answer at all is reported to the view.
func (f *Fleet) call(ctx context.Context, sb Sandbox, op string, verb func(context.Context, *sandboxd.Client) error) error {
	return f.callWithin(ctx, sb, op, f.cfg.NodeTimeout, verb)
}

// copyTimeout bounds the verbs that copy a sandbox's whole state (fork,
// checkpoint, promote): a node exports memory and disk for them, which on
// a large sandbox takes far longer than an ordinary call's NodeTimeout.
const copyTimeout = 2 * time.Minute

// callCopying is call for a verb that copies the sandbox's state, bounded
// by copyTimeout (or NodeTimeout when that is longer).
func (f *Fleet) callCopying(ctx context.Context, sb Sandbox, op string, verb func(context.Context, *sandboxd.Client) error) error {
	return f.callWithin(ctx, sb, op, max(copyTimeout, f.cfg.NodeTimeout), verb)
}

func (f *Fleet) callWithin(ctx context.Context, sb Sandbox, op string, bound time.Duration, verb func(context.Context, *sandboxd.Client) error) error {
	c, err := f.Client(sb.NodeAddr)
	if err != nil {
		return fmt.Errorf("fleet: %s: %w: %w", op, sandboxd.ErrUnavailable, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	err = verb(callCtx, c)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, sandboxd.ErrNotFound):
		return fmt.Errorf("fleet: %s: %w: %w", op, ErrNotFound, err)
	case unreachable(ctx, err) && f.rec != nil:
		f.rec.Unreachable(sb.NodeAddr, err)
	}
	return fmt.Errorf("fleet: %s: %w", op, err)
}
