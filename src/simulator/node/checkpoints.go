package node

import (
	"cmp"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// maxCheckpointName bounds a checkpoint name; names are labels, not data.
const maxCheckpointName = 128

// maxCheckpointRedirects caps the owners a checkpoint redirect names.
const maxCheckpointRedirects = 3

func validCheckpointName(name string) bool {
	if len(name) > maxCheckpointName {
		return false
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.' || r == ':') {
			return false
		}
	}
	return true
}

func (n *Node) createCheckpoint(c caller, id string, req sandboxd.CheckpointRequest) (sandboxd.Checkpoint, *apiError) {
	if !validCheckpointName(req.Name) {
		return sandboxd.Checkpoint{}, errorf(http.StatusBadRequest, "invalid checkpoint name")
	}
	n.mu.Lock()
	sb, aerr := n.parentLocked(c, id, req.Token)
	if aerr == nil {
		aerr = staysLive(sb, "checkpoint")
	}
	if aerr == nil {
		aerr = refuseArchived(sb, "checkpoint")
	}
	if aerr == nil {
		aerr = refuseFailed(sb, "checkpoint")
	}
	if aerr != nil {
		n.mu.Unlock()
		return sandboxd.Checkpoint{}, aerr
	}
	n.seq++
	ck := &checkpoint{
		rec: sandboxd.Checkpoint{
			ID:        newCheckpointID(),
			Name:      req.Name,
			SandboxID: sb.id,
			Key:       sb.key,
			Tenant:    c.tenantName(),
			CreatedAt: n.cfg.Clock.Now().UTC(),
		},
		seq: n.seq,
	}
	src := filepath.Join(n.scratch, sb.id)
	guests := sb.guests
	n.mu.Unlock()

	// Capture the disk outside the lock; the record appears once complete.
	// A machine always has a disk; in-process guests only once they wrote.
	if _, err := os.Stat(src); err == nil || guests.machine != nil {
		dst := filepath.Join(n.scratch, ck.rec.ID)
		if err := guests.saveDisk(dst); err != nil {
			_ = os.RemoveAll(dst)
			return sandboxd.Checkpoint{}, errorf(http.StatusInternalServerError, "checkpoint failed")
		}
		ck.dir = dst
	}
	n.mu.Lock()
	n.checkpoints[ck.rec.ID] = ck
	n.mu.Unlock()
	n.stats.checkpoints.Add(1)
	return ck.rec, nil
}

// listCheckpoints answers newest first; a tenant sees only its own.
func (n *Node) listCheckpoints(c caller) []sandboxd.Checkpoint {
	n.mu.Lock()
	cks := make([]*checkpoint, 0, len(n.checkpoints))
	for _, ck := range n.checkpoints {
		if c.kind == callerTenant && ck.rec.Tenant != c.tenant {
			continue
		}
		cks = append(cks, ck)
	}
	n.mu.Unlock()
	slices.SortFunc(cks, func(a, b *checkpoint) int {
		if d := b.rec.CreatedAt.Compare(a.rec.CreatedAt); d != 0 {
			return d
		}
		return cmp.Compare(b.seq, a.seq)
	})
	out := make([]sandboxd.Checkpoint, len(cks))
	for i, ck := range cks {
		out[i] = ck.rec
	}
	return out
}

func (n *Node) deleteCheckpoint(c caller, id string) *apiError {
	n.mu.Lock()
	ck := n.checkpoints[id]
	if ck == nil || (c.kind == callerTenant && ck.rec.Tenant != c.tenant) {
		n.mu.Unlock()
		return errNoCheckpoint
	}
	delete(n.checkpoints, id)
	n.mu.Unlock()
	if ck.dir != "" {
		_ = os.RemoveAll(ck.dir)
	}
	return nil
}

// HasCheckpoint answers the peer ownership probe.
func (n *Node) HasCheckpoint(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.checkpoints[id] != nil
}

// claimCheckpoint branches a fresh claim from a checkpoint. A local miss
// probes the mesh and redirects to up to three owners unless no_redirect.
func (n *Node) claimCheckpoint(ctx context.Context, c caller, id string, req sandboxd.CheckpointClaimRequest) (sandboxd.ClaimResponse, *apiError) {
	lease, aerr := n.grantTTL(req.TTLSeconds)
	if aerr != nil {
		return sandboxd.ClaimResponse{}, aerr
	}
	n.mu.Lock()
	ck := n.checkpoints[id]
	n.mu.Unlock()
	if ck == nil {
		if !req.NoRedirect && n.cfg.Mesh != nil {
			var owners []string
			for _, p := range n.cfg.Mesh.Peers(n) {
				if p.HasCheckpoint(id) {
					owners = append(owners, p.Addr())
				}
				if len(owners) == maxCheckpointRedirects {
					break
				}
			}
			if len(owners) > 0 {
				n.stats.redirects.Add(1)
				return sandboxd.ClaimResponse{Redirect: owners}, nil
			}
		}
		return sandboxd.ClaimResponse{}, errNoCheckpoint
	}

	start := time.Now()
	// The branch is labelled by this request alone: the source's metadata
	// described the source.
	lbl := labels{ref: req.ClaimRef, metadata: req.Metadata, opts: claimOptions{onExpire: req.OnExpire, env: req.Env}}
	sb, tier, aerr := n.provision(ctx, ck.rec.Key, c.tenantName(), lbl, lease, origin{checkpoint: ck.rec.ID})
	if aerr != nil {
		return sandboxd.ClaimResponse{}, aerr
	}
	n.handOver(sb)
	if ck.dir != "" && sb.guests.machine == nil { // a machine started from ck.dir
		if err := copyTreeIfExists(ck.dir, filepath.Join(n.scratch, sb.id)); err != nil {
			n.log.Warn("checkpoint claim: copy scratch failed", "node", n.cfg.Name, "sandbox", sb.id, "err", err)
		}
	}
	n.mu.Lock()
	resp := n.claimResponse(sb)
	n.mu.Unlock()
	tier.Add(1)
	n.stats.checkpointClaims.Add(1)
	n.stats.claimNanos.Add(int64(time.Since(start)))
	return resp, nil
}
