package e2b

import (
	"context"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// The auto-pause of a sandbox is armed by the replica that created it (and
// re-armed by whichever replica renews it), but that replica may be gone
// when the timeout comes. Every replica therefore sweeps the nodes for
// sandboxes created with autoPause (their claim label says so) whose
// timeout is near and arms their pause too. Two replicas pausing the same
// sandbox both hibernate it (idempotent) and renew it for the retention:
// the result is the same.

// sweepAutoPauses arms the pause of every auto-pause sandbox on the nodes
// whose timeout falls within the next lead plus two sweeps.
func (s *Server) sweepAutoPauses(ctx context.Context) {
	nodes, err := s.fleet.Nodes()
	if err != nil {
		s.log.Warn("auto-pause sweep: listing the nodes failed", "err", err)
		return
	}
	horizon := s.cfg.Clock.Now().Add(s.cfg.AutoPauseLead + 2*s.cfg.AutoPauseSweep)
	for _, n := range nodes {
		nctx, cancel := context.WithTimeout(ctx, rowsTimeout)
		rows, err := n.SandboxesMatching(nctx, "", map[string]string{labelAutoPause: "true"})
		cancel()
		if err != nil {
			s.log.Debug("auto-pause sweep: a node could not be read", "node", n.Addr(), "err", err)
			continue
		}
		for _, r := range rows {
			if r.Hibernated || r.Deadline.After(horizon) || s.pauser.pending(r.ID) {
				continue
			}
			ref, ok := sandbox.ParseClaimRef(r.ClaimRef)
			if !ok {
				continue
			}
			sb, err := s.fleet.Find(ctx, ref.Namespace, r.ID)
			if err != nil {
				continue
			}
			sb.NodeAddr, sb.Deadline = n.Addr(), r.Deadline
			s.pauser.schedule(sb, r.Deadline)
		}
	}
}

// runAutoPauseSweeps sweeps every AutoPauseSweep until stop is closed.
func (s *Server) runAutoPauseSweeps(stop <-chan struct{}) {
	t := time.NewTicker(s.cfg.AutoPauseSweep)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), s.cfg.AutoPauseSweep+rowsTimeout)
			s.sweepAutoPauses(ctx)
			cancel()
		}
	}
}
