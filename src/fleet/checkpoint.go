package fleet

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// CheckpointClaimRequest is a claim of a fresh sandbox branched from a
// checkpoint.
type CheckpointClaimRequest struct {
	Ref sandbox.ClaimRef
	// Checkpoint is the checkpoint id ("ck_…") and NodeAddr the node that
	// listed it; the claim enters there and follows the node's redirects
	// to the peers that hold it, as sandboxd's checkpoint claim does.
	Checkpoint string
	NodeAddr   string
	// TTLSeconds is the lease asked for; 0 takes the node's default.
	TTLSeconds int
	// Metadata are the branch's claim labels.
	Metadata map[string]string
	// OnExpire is the branch's expiry action, as ClaimRequest's.
	OnExpire string
}

// ClaimCheckpoint claims a sandbox branched from a checkpoint, with its
// token. The branch takes the checkpoint's pool key. An unknown checkpoint
// wraps ErrNotFound.
func (f *Fleet) ClaimCheckpoint(ctx context.Context, req CheckpointClaimRequest) (_ Claimed, err error) {
	defer f.observeOperation(OperationCheckpointClaim, f.cfg.Clock.Now(), &err)
	if _, err := sandbox.NewClaimRef(req.Ref.Namespace, req.Ref.Name); err != nil {
		return Claimed{}, fmt.Errorf("fleet: claim checkpoint: %w: %w", ErrInvalid, err)
	}
	c, err := f.Client(req.NodeAddr)
	if err != nil {
		return Claimed{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.NodeTimeout)
	defer cancel()
	if err := ValidateMetadata(req.Metadata); err != nil {
		return Claimed{}, fmt.Errorf("fleet: claim checkpoint: %w: %w", ErrInvalid, err)
	}
	attempt := newAttempt()
	body := sandboxd.CheckpointClaimRequest{
		TTLSeconds: max(req.TTLSeconds, 0), ClaimRef: req.Ref.String(), Metadata: withAttempt(req.Metadata, attempt), OnExpire: req.OnExpire,
	}
	cl, err := c.ClaimCheckpoint(ctx, req.Checkpoint, body)
	if err != nil {
		if errors.Is(err, sandboxd.ErrNotFound) {
			return Claimed{}, fmt.Errorf("fleet: claim checkpoint %s: %w", req.Checkpoint, ErrNotFound)
		}
		if !errors.Is(err, sandboxd.ErrBadRequest) && !errors.Is(err, sandboxd.ErrConflict) && !errors.Is(err, sandboxd.ErrCapacity) {
			// The node may have granted it before the answer was lost.
			f.releaseOrphans(req.NodeAddr, body.ClaimRef, attempt, time.Duration(body.TTLSeconds)*time.Second)
		}
		return Claimed{}, fmt.Errorf("fleet: claim checkpoint %s: %w", req.Checkpoint, err)
	}
	id, ok := sandbox.CanonicalID(cl.ID)
	if !ok {
		return Claimed{}, fmt.Errorf("fleet: node %s answered a malformed sandbox id", req.NodeAddr)
	}
	owner := cmp.Or(cl.OwnerAddr, req.NodeAddr)
	// The answer names no key; the branch has the checkpoint's, which
	// the node reports for the sandbox.
	key := sandbox.PoolKey{}
	if info, err := c.At(owner); err == nil {
		if row, err := info.Sandbox(ctx, id); err == nil {
			key = row.Key
		}
	}
	all := f.cfg.View.Nodes()
	sb := Sandbox{
		ID: id, ClaimRef: req.Ref, Key: key,
		Node: nodeName(all, owner, Node{Name: owner, Addr: owner}), NodeAddr: owner,
		ClaimedAt: f.cfg.Clock.Now(), Deadline: cl.Deadline, Metadata: req.Metadata,
	}
	if f.rec != nil {
		f.rec.Claimed(sb)
	}
	return Claimed{Sandbox: sb, Token: cl.Token}, nil
}

// NodeCheckpoints is one node's checkpoints, or why they could not be
// read.
type NodeCheckpoints struct {
	// Addr is the node's sandboxd host:port: where a claim or delete of
	// one of its checkpoints goes.
	Addr        string
	Checkpoints []sandboxd.Checkpoint
	// Err is set when the node could not be read; Checkpoints is empty
	// then.
	Err error
}

// NodeCheckpoints reads every node's checkpoints (GET /v1/checkpoints) in
// parallel, each node within NodeTimeout: a checkpoint outlives the
// sandbox it was taken from, so no sandbox places it. One entry per node
// that may take claims, in the view's order, a node that could not be
// read included with its Err.
func (f *Fleet) NodeCheckpoints(ctx context.Context) []NodeCheckpoints {
	read := eachNode(ctx, f, "list checkpoints", func(ctx context.Context, c *sandboxd.Client) ([]sandboxd.Checkpoint, error) {
		return c.Checkpoints(ctx)
	})
	out := make([]NodeCheckpoints, len(read))
	for i, r := range read {
		out[i] = NodeCheckpoints{Addr: r.addr, Checkpoints: r.val, Err: r.err}
	}
	return out
}

// DeleteCheckpoint deletes the checkpoint id from the node at addr; one
// the node does not hold wraps sandboxd.ErrNotFound.
func (f *Fleet) DeleteCheckpoint(ctx context.Context, addr, id string) error {
	return f.onNode(ctx, addr, "delete checkpoint "+id, func(ctx context.Context, c *sandboxd.Client) error {
		return c.DeleteCheckpoint(ctx, id)
	})
}
