package e2b

import (
	"context"
	"fmt"
	"net/http"
	"strings"
)

// admitSnapshot applies the namespace's snapshot cap before a snapshot is
// taken, answering 429 in e2b's error shape at the cap. On success the
// caller takes the snapshot and then calls unlock: snapshots of one
// namespace are counted and taken one at a time in this process, so two
// at once cannot both pass the count. Only the count is bounded: sandboxd
// reports no checkpoint's size, before or after it is taken.
func (s *Server) admitSnapshot(w http.ResponseWriter, r *http.Request, c caller) (unlock func(), ok bool) {
	if s.cfg.MaxSnapshots <= 0 {
		return func() {}, true
	}
	unlock = s.snapshotLocks.lock(c.namespace)
	n := s.countSnapshots(r.Context(), c.namespace)
	if n >= s.cfg.MaxSnapshots {
		unlock()
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf(
			"this API key's namespace has reached its limit of %d snapshots; delete one before taking another",
			s.cfg.MaxSnapshots))
		return nil, false
	}
	return unlock, true
}

// countSnapshots counts the namespace's checkpoints on every node that
// answers. A node that does not answer contributes none: its snapshots
// cannot be claimed either until it is back.
func (s *Server) countSnapshots(ctx context.Context, namespace string) int {
	n := 0
	for _, node := range s.fleet.NodeCheckpoints(ctx) {
		if node.Err != nil {
			s.log.Warn("e2b: a node's snapshots could not be counted against the namespace's cap", "node", node.Addr, "err", node.Err)
			continue
		}
		for _, ck := range node.Checkpoints {
			if strings.HasPrefix(ck.Name, namespace+":") {
				n++
			}
		}
	}
	return n
}
