package e2b

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
)

// metrics is GET /sandboxes/{id}/metrics: one point, the node's current
// reading. sandboxd measures no CPU or disk use, so those are 0.
func (s *Server) metrics(w http.ResponseWriter, r *http.Request, c caller) {
	sb, ok := s.lookup(w, r, c)
	if !ok {
		return
	}
	m, err := s.readMetric(r.Context(), sb)
	if err != nil {
		s.fleetError(w, err, "read metrics")
		return
	}
	writeJSON(w, http.StatusOK, []wire.SandboxMetric{m})
}

// maxBatchMetrics bounds the sandboxes one batch metrics call reads.
const maxBatchMetrics = 100

// batchMetrics is GET /sandboxes/metrics: the latest metric of each of
// the caller's sandboxes in sandbox_ids (repeated, or comma-separated).
// An id that names no sandbox of the caller's, or whose node cannot be
// read, is left out, as the single call would answer it 404.
func (s *Server) batchMetrics(w http.ResponseWriter, r *http.Request, c caller) {
	var ids []string
	for _, v := range r.URL.Query()["sandbox_ids"] {
		for id := range strings.SplitSeq(v, ",") {
			if id = strings.TrimSpace(id); id != "" && !slices.Contains(ids, id) {
				ids = append(ids, id)
			}
		}
	}
	if len(ids) == 0 {
		writeError(w, http.StatusBadRequest, "sandbox_ids is required")
		return
	}
	if len(ids) > maxBatchMetrics {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("at most %d sandbox_ids per call", maxBatchMetrics))
		return
	}
	out := wire.BatchMetricsResponse{Sandboxes: map[string]wire.SandboxMetric{}}
	for _, id := range ids {
		sb, err := s.fleet.Find(r.Context(), c.namespace, id)
		if err != nil {
			continue
		}
		if m, err := s.readMetric(r.Context(), sb); err == nil {
			out.Sandboxes[dnsID(sb.ID)] = m
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// readMetric reads sb's usage from its node.
func (s *Server) readMetric(ctx context.Context, sb fleet.Sandbox) (wire.SandboxMetric, error) {
	st, err := s.fleet.Stats(ctx, sb)
	if err != nil {
		return wire.SandboxMetric{}, err
	}
	at := st.MeasuredAt
	if at.IsZero() {
		at = s.cfg.Clock.Now()
	}
	return wire.SandboxMetric{
		Timestamp: at.UTC(), TimestampUnix: at.Unix(), CPUCount: st.CPUCount,
		MemUsed: st.MemUsedBytes, MemTotal: st.MemTotalBytes,
	}, nil
}
