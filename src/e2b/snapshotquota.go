package e2b

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/e2b/admission"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// admitSnapshot applies the namespace's snapshot bounds before a snapshot
// of a sandbox of key is taken, answering in e2b's error shape: 429 at the
// count, 413 when the snapshot could take the namespace past its bytes. On
// success the caller takes the snapshot and then calls unlock: snapshots
// of one namespace are counted and taken one at a time in this process,
// so two at once cannot both pass.
//
// sandboxd reports no checkpoint's size, before or after it is taken, so
// each snapshot counts at the most it can hold: its size tier's disk.
func (s *Server) admitSnapshot(w http.ResponseWriter, r *http.Request, c caller, key sandbox.PoolKey) (unlock func(), ok bool) {
	if s.cfg.MaxSnapshots <= 0 && s.cfg.MaxSnapshotBytes <= 0 {
		return func() {}, true
	}
	unlock = s.snapshotLocks.Lock(c.namespace)
	n, held := s.countSnapshots(r.Context(), c.namespace)
	switch next := admission.SnapshotBound(key); {
	case s.cfg.MaxSnapshots > 0 && n >= s.cfg.MaxSnapshots:
		unlock()
		s.cfg.Refusals.Refused(metrics.ReasonQuota)
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"this API key's namespace has reached its limit of %d snapshots; delete one before taking another",
			s.cfg.MaxSnapshots))
		return nil, false
	case s.cfg.MaxSnapshotBytes > 0 && held+next > s.cfg.MaxSnapshotBytes:
		unlock()
		s.cfg.Refusals.Refused(metrics.ReasonQuota)
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf(
			"this API key's namespace's snapshots may hold at most %d bytes: it holds up to %d, and a snapshot of this sandbox (size %s) up to %d more; delete one before taking another",
			s.cfg.MaxSnapshotBytes, held, key.WithDefaults().Size, next))
		return nil, false
	}
	return unlock, true
}

// countSnapshots counts the namespace's checkpoints on every node that
// answers, and the bytes they may hold. A node that does not answer
// contributes none: its snapshots cannot be claimed either until it is
// back.
func (s *Server) countSnapshots(ctx context.Context, namespace string) (n int, bytes int64) {
	for _, node := range s.fleet.NodeCheckpoints(ctx) {
		if node.Err != nil {
			s.log.Warn("e2b: a node's snapshots could not be counted against the namespace's bounds", "node", node.Addr, "err", node.Err)
			continue
		}
		for _, ck := range node.Checkpoints {
			if strings.HasPrefix(ck.Name, namespace+":") {
				n++
				bytes += admission.SnapshotBound(ck.Key)
			}
		}
	}
	return n, bytes
}
