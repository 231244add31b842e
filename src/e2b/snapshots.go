package e2b

import (
	"cmp"
	"context"
	"errors"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Snapshots are sandboxd checkpoints. sandboxd keeps no namespace on a
// checkpoint, so the surface names each one "<namespace>:<name>" and shows
// a key only the checkpoints whose name starts with its namespace; the
// checkpoints kubectl takes (no such prefix) stay invisible here.

// snapshotNameRE is the name a caller may give a snapshot: what sandboxd
// accepts in a checkpoint name, minus the ':' the namespace prefix uses.
var snapshotNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// checkpointPrefix starts the checkpoint id sandboxd assigns.
const checkpointPrefix = "ck_"

func scopedName(namespace, name string) string { return namespace + ":" + name }

// snapshotOf renders a checkpoint of namespace as e2b's SnapshotInfo, and
// false when the checkpoint is not the namespace's.
func snapshotOf(namespace string, ck sandboxd.Checkpoint) (wire.SnapshotInfo, bool) {
	name, ok := strings.CutPrefix(ck.Name, namespace+":")
	if !ok {
		return wire.SnapshotInfo{}, false
	}
	out := wire.SnapshotInfo{SnapshotID: ck.ID, Names: []string{}}
	if name != "" {
		out.Names = []string{name}
	}
	return out, true
}

// createSnapshot is POST /sandboxes/{id}/snapshots: a sandboxd checkpoint
// of the running sandbox, 201 with its id; 429 at the namespace's
// snapshot cap.
func (s *Server) createSnapshot(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.SnapshotRequest
	if !decodeBody(w, r, &req, true) {
		return
	}
	if req.Name != "" && !snapshotNameRE.MatchString(req.Name) {
		writeError(w, http.StatusBadRequest, "snapshot name must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit")
		return
	}
	sb, ok := s.lookup(w, r, c)
	if !ok {
		return
	}
	unlock, ok := s.admitSnapshot(w, r, c, sb.Key)
	if !ok {
		return
	}
	defer unlock()
	ck, err := s.fleet.Checkpoint(r.Context(), sb, scopedName(c.namespace, req.Name))
	if err != nil {
		s.fleetError(w, err, "snapshot")
		return
	}
	info, _ := snapshotOf(c.namespace, *ck)
	writeJSON(w, http.StatusCreated, info)
}

// namespaceCheckpoints lists the namespace's checkpoints on every node,
// newest first. ok is false (and the answer written) when a node cannot
// be read: a list missing a node's snapshots would page past them.
func (s *Server) namespaceCheckpoints(w http.ResponseWriter, ctx context.Context, namespace string) ([]sandboxd.Checkpoint, bool) {
	var out []sandboxd.Checkpoint
	for _, n := range s.fleet.NodeCheckpoints(ctx) {
		if n.Err != nil {
			s.fleetError(w, n.Err, "list snapshots")
			return nil, false
		}
		for _, ck := range n.Checkpoints {
			if strings.HasPrefix(ck.Name, namespace+":") {
				out = append(out, ck)
			}
		}
	}
	// Newest first, ties by id, both descending: the order the page
	// cursor resumes in (an ascending tie-break skipped snapshots made in
	// the same instant as a page's last one).
	slices.SortFunc(out, func(a, b sandboxd.Checkpoint) int {
		return -cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.ID, b.ID))
	})
	return out, true
}

// listSnapshots is GET /snapshots, filtered by sandboxID and name and
// paginated like the sandbox list (newest first).
func (s *Server) listSnapshots(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	limit, after, ok := parsePage(w, q)
	if !ok {
		return
	}
	wantSandbox := ""
	if v := q.Get("sandboxID"); v != "" {
		id, ok := sandbox.CanonicalID(v)
		if !ok {
			writeJSON(w, http.StatusOK, []wire.SnapshotInfo{})
			return
		}
		wantSandbox = id
	}
	wantName := q.Get("name")
	cks, ok := s.namespaceCheckpoints(w, r.Context(), c.namespace)
	if !ok {
		return
	}
	var matched []sandboxd.Checkpoint
	for _, ck := range cks {
		if wantSandbox != "" && !sandbox.SameID(ck.SandboxID, wantSandbox) {
			continue
		}
		if wantName != "" && ck.Name != scopedName(c.namespace, wantName) && ck.ID != wantName {
			continue
		}
		matched = append(matched, ck)
	}
	start := 0
	if after != nil {
		start = sandbox.ResumeAfter(matched, *after, func(ck sandboxd.Checkpoint, c cursor) int { return c.compare(ck.CreatedAt, ck.ID, true) })
	}
	page := matched[start:min(start+limit, len(matched))]
	out := make([]wire.SnapshotInfo, 0, len(page))
	for _, ck := range page {
		info, _ := snapshotOf(c.namespace, ck)
		out = append(out, info)
	}
	if start+limit < len(matched) {
		last := page[len(page)-1]
		w.Header().Set("X-Next-Token", cursor{at: last.CreatedAt, id: last.ID}.String())
	}
	writeJSON(w, http.StatusOK, out)
}

// deleteSnapshot is DELETE /templates/{id} for a snapshot id (how the SDK
// deletes one). Templates are not managed here, so any other id is 404.
func (s *Server) deleteSnapshot(w http.ResponseWriter, r *http.Request, c caller) {
	id := r.PathValue("templateID")
	if !strings.HasPrefix(id, checkpointPrefix) {
		writeError(w, http.StatusNotFound, "snapshot not found")
		return
	}
	deleted := false
	for _, n := range s.fleet.NodeCheckpoints(r.Context()) {
		if n.Err != nil {
			s.fleetError(w, n.Err, "delete snapshot")
			return
		}
		for _, ck := range n.Checkpoints {
			if ck.ID != id || !strings.HasPrefix(ck.Name, c.namespace+":") {
				continue
			}
			if err := s.fleet.DeleteCheckpoint(r.Context(), n.Addr, id); err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
				s.fleetError(w, err, "delete snapshot")
				return
			}
			deleted = true
		}
	}
	if !deleted {
		writeError(w, http.StatusNotFound, "snapshot not found")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
