package e2b

import (
	"cmp"
	"net/http"
	"strconv"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
)

// Bounds of one build logs page, e2b's: 100 entries unless asked, at most
// 1000.
const (
	defaultBuildLogsPage = 100
	maxBuildLogsPage     = 1000
)

// buildLogs is GET /templates/{id}/builds/{buildID}/logs: the build's
// structured log, from cursor (milliseconds since the epoch) forward, or
// backward to it, at level or above. A build this replica did not run (or
// ran before a restart) that was published answers with no lines, as its
// status does.
func (s *Server) buildLogs(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	cursor, err := strconv.ParseInt(cmp.Or(q.Get("cursor"), "0"), 10, 64)
	if err != nil || cursor < 0 {
		writeError(w, http.StatusBadRequest, "cursor must be a non-negative number of milliseconds")
		return
	}
	limit, err := strconv.Atoi(cmp.Or(q.Get("limit"), strconv.Itoa(defaultBuildLogsPage)))
	if err != nil || limit < 0 || limit > maxBuildLogsPage {
		writeError(w, http.StatusBadRequest, "limit must be between 0 and 1000")
		return
	}
	direction := cmp.Or(q.Get("direction"), "forward")
	if direction != "forward" && direction != "backward" {
		writeError(w, http.StatusBadRequest, "direction must be forward or backward")
		return
	}
	minLevel, ok := levelRank[cmp.Or(q.Get("level"), build.LevelDebug)]
	if !ok {
		writeError(w, http.StatusBadRequest, "level must be one of debug, info, warn, error")
		return
	}
	out := wire.BuildLogsResponse{Logs: []wire.BuildLogEntry{}}
	b, ok := s.lookupBuild(w, r, c)
	if !ok {
		return
	}
	if b == nil {
		writeJSON(w, http.StatusOK, out)
		return
	}
	from := time.UnixMilli(cursor)
	entries := b.View(0, s.builds.LogLines()).Logs
	if direction == "backward" {
		for i := len(entries) - 1; i >= 0 && len(out.Logs) < limit; i-- {
			e := entries[i]
			if (cursor == 0 || !e.Timestamp.After(from)) && levelRank[e.Level] >= minLevel {
				out.Logs = append(out.Logs, wireLog(e))
			}
		}
	} else {
		for _, e := range entries {
			if len(out.Logs) >= limit {
				break
			}
			if !e.Timestamp.Before(from) && levelRank[e.Level] >= minLevel {
				out.Logs = append(out.Logs, wireLog(e))
			}
		}
	}
	writeJSON(w, http.StatusOK, out)
}
