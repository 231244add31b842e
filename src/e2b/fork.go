package e2b

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// defaultForkTimeout is e2b's lease of a fork child when the request names
// none.
const defaultForkTimeout = 15

// fork is POST /sandboxes/{id}/fork: sandboxd's fork verb makes count
// children of the running sandbox on its node, each with its own lease,
// the parent's files, memory and claim labels (so its metadata, alias and
// internet choice), and its own claim token, from which its envd access
// token derives; each child's envd is handed that token as a create's is.
// A child whose envd cannot be initialized is given back and reported in
// its entry; a fork the node refuses as a whole is the request's error.
func (s *Server) fork(w http.ResponseWriter, r *http.Request, c caller) {
	parent, ok := s.lookup(w, r, c)
	if !ok {
		return
	}
	var req wire.ForkRequest
	if !decodeBody(w, r, &req, true) {
		return
	}
	count, ttl := 1, defaultForkTimeout
	if req.Count != nil {
		count = *req.Count
	}
	if req.Timeout != nil {
		ttl = *req.Timeout
	}
	if count < 1 || count > sandbox.MaxForkCount {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("count must be between 1 and %d (sandboxd's max_fork_count), got %d", sandbox.MaxForkCount, count))
		return
	}
	if ttl < 1 {
		writeError(w, http.StatusBadRequest, fmt.Sprintf("timeout must be at least 1 second, got %d", ttl))
		return
	}
	if parent.Key.Net == NetEgress {
		writeError(w, http.StatusBadRequest, "a sandbox with internet access cannot be forked: sandboxd forks only isolated-lane sandboxes; create it with allowInternetAccess: false")
		return
	}
	if parent.Paused {
		writeError(w, http.StatusConflict, "the sandbox is paused: connect to resume it, then fork")
		return
	}
	rec, _ := s.records.Of(r.Context(), parent)
	children, err := s.fleet.Fork(r.Context(), parent, count, ttl)
	if err != nil {
		s.fleetError(w, err, "fork")
		return
	}
	out := make([]wire.ForkResult, 0, count)
	for _, child := range children {
		access := envdtoken.Derive(s.cfg.EnvdSecret, child.Token)
		if err := s.initForkedEnvd(r, child, parent, access); err != nil {
			s.log.Warn("e2b fork: initializing a child's envd failed; releasing it", "sandbox", child.ID, "err", err)
			s.fleet.Abandon(child.Sandbox)
			out = append(out, wire.ForkResult{Error: &wire.ErrorBody{Code: http.StatusBadGateway, Message: "the forked sandbox's envd could not be initialized; it was released"}})
			continue
		}
		childRec := rec
		childRec.Deadline = child.Deadline
		// sandboxd gives the children the parent's on_expire, so a child
		// of an onTimeout "pause" sandbox is archived at its own timeout.
		s.records.Put(child.ID, childRec)
		resp := s.renderSandbox(child.Sandbox, s.aliasOf(child.Key, &childRec), access)
		out = append(out, wire.ForkResult{Sandbox: &resp})
	}
	// The node makes all or none; a child it named that no front can
	// address is reported missing rather than dropped from the count.
	for len(out) < count {
		out = append(out, wire.ForkResult{Error: &wire.ErrorBody{Code: http.StatusInternalServerError, Message: "the node reported a child this server cannot address"}})
	}
	writeJSON(w, http.StatusCreated, out)
}

// initForkedEnvd hands a child's envd its own access token. A child is a
// copy of its parent's machine, so a guest that took its token at /init
// still holds the parent's and admits the new one only from it, while a
// guest that derives its token from its own claim (the simulator's, an
// image that does so) already holds the child's: the child's token is
// tried first, the parent's after a refusal.
func (s *Server) initForkedEnvd(r *http.Request, child fleet.Claimed, parent fleet.Sandbox, access string) error {
	err := s.initEnvd(r.Context(), child, access, nil)
	if err == nil || !errors.Is(err, errEnvdRefused) {
		return err
	}
	parentToken, terr := s.fleet.Token(r.Context(), parent)
	if terr != nil {
		return fmt.Errorf("%w; reading the parent's token to retry: %w", err, terr)
	}
	return s.initEnvdAs(r.Context(), child, envdtoken.Derive(s.cfg.EnvdSecret, parentToken), access, nil)
}
