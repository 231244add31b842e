package envd

import (
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"strings"
)

// maxInitBodyBytes bounds a POST /init body: env vars and a few settings.
const maxInitBodyBytes = 1 << 20

// initRequest is envd's internal POST /init body, with which e2b's
// orchestrator sets up a freshly started sandbox. envVars and accessToken
// change the guest; the other fields (timestamp, defaultUser,
// defaultWorkdir, hyperloopIP, volumeMounts, …) are accepted and ignored,
// because the simulator's user is fixed by its Config.
type initRequest struct {
	EnvVars     map[string]string `json:"envVars"`
	AccessToken *string           `json:"accessToken"`
}

// serveInit merges the body's envVars into the sandbox-wide environment
// every later process gets (a later value wins) and answers 204. It sits
// behind the access-token check like every non-health path.
func (g *Guest) serveInit(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxInitBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeJSONError(w, http.StatusRequestEntityTooLarge, "init body too large")
			return
		}
		writeJSONError(w, http.StatusBadRequest, "could not read the init body")
		return
	}
	var req initRequest
	if len(strings.TrimSpace(string(raw))) > 0 {
		if err := json.Unmarshal(raw, &req); err != nil {
			writeJSONError(w, http.StatusBadRequest, "invalid init body: "+err.Error())
			return
		}
	}
	for k := range req.EnvVars {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			writeJSONError(w, http.StatusBadRequest, "invalid environment variable name")
			return
		}
	}
	g.envMu.Lock()
	if g.envs == nil {
		g.envs = map[string]string{}
	}
	maps.Copy(g.envs, req.EnvVars)
	// Like envd, the token in force guards /init itself (see
	// requireAccessToken), so only a caller holding it, or anyone while
	// none is set, may set another.
	if req.AccessToken != nil {
		g.accessToken = *req.AccessToken
	}
	g.envMu.Unlock()
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}
