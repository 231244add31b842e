package e2b

import (
	"context"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
)

// recordOf is what sb's create recorded: from this process's cache, else
// from the claim labels the view carries, else from the node's index (see
// nodeRows), whichever replica took the create. ok is false when the
// node cannot be read or does not list the sandbox.
func (s *Server) recordOf(ctx context.Context, sb fleet.Sandbox) (record, bool) {
	if rec, ok := s.tracked.get(sb.Namespace, sb.ID); ok {
		return rec, true
	}
	labels := sb.Metadata
	if labels == nil {
		l, found, err := s.rows.labels(ctx, sb.NodeAddr, sb.ID, sb.ClaimedAt)
		if err != nil {
			s.log.Debug("e2b: reading a sandbox's labels from its node failed", "sandbox", sb.ID, "err", err)
			return record{}, false
		}
		if !found {
			return record{}, false
		}
		labels = l
	}
	rec := recordFrom(sb.Namespace, labels)
	rec.deadline = sb.Deadline
	s.tracked.put(sb.ID, rec)
	return s.tracked.get(sb.Namespace, sb.ID)
}
