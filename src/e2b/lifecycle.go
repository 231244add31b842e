package e2b

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b/records"
	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// noPauseOnEgress is the refusal of an onTimeout "pause" on the egress
// lane, which sandboxd never hibernates or archives.
const noPauseOnEgress = "a sandbox with internet access cannot be paused (sandboxd keeps egress-lane sandboxes running): " +
	"create it with allowInternetAccess: false to get a pausable sandbox"

// maxRefreshSeconds is e2b's bound on a refresh's duration.
const maxRefreshSeconds = 3600

// renew sets the sandbox's lease to ttl seconds from now on its node and
// keeps the metadata for as long. What happens at the new end (destroy,
// or archive for onTimeout "pause") stays as the claim set it: sandboxd
// keeps a claim's on_expire across renews.
func (s *Server) renew(w http.ResponseWriter, r *http.Request, sb fleet.Sandbox, ttl int) bool {
	return s.renewWith(w, r, sb, fleet.Renewal{TTLSeconds: ttl})
}

// renewWith is renew on the terms of rn, which may switch the expiry
// action.
func (s *Server) renewWith(w http.ResponseWriter, r *http.Request, sb fleet.Sandbox, rn fleet.Renewal) bool {
	deadline, err := s.fleet.RenewWith(r.Context(), sb, rn)
	if err != nil {
		s.fleetError(w, err, "renew")
		return false
	}
	s.records.Extend(sb.ID, deadline)
	return true
}

// setTimeout is POST /sandboxes/{id}/timeout: the sandbox expires timeout
// seconds from now, sooner or later than before. sandboxd reads a lease of
// 0 as its default, so a timeout of 0 asks for the shortest lease it
// grants, one second.
func (s *Server) setTimeout(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.TimeoutRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	if req.Timeout == nil || *req.Timeout < 0 {
		writeError(w, http.StatusBadRequest, "timeout is required and must not be negative")
		return
	}
	sb, ok := s.lookup(w, r, c)
	if !ok {
		return
	}
	if s.renew(w, r, sb, max(*req.Timeout, 1)) {
		w.WriteHeader(http.StatusNoContent)
	}
}

// refresh is POST /sandboxes/{id}/refreshes: the lease becomes duration
// seconds, or the default timeout when it names none.
func (s *Server) refresh(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.RefreshRequest
	if !decodeBody(w, r, &req, true) {
		return
	}
	ttl := int(s.cfg.DefaultTimeout / time.Second)
	if req.Duration != nil {
		if *req.Duration < 0 || *req.Duration > maxRefreshSeconds {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("duration must be 0-%d seconds", maxRefreshSeconds))
			return
		}
		if *req.Duration > 0 {
			ttl = *req.Duration
		}
	}
	sb, ok := s.lookup(w, r, c)
	if !ok {
		return
	}
	if s.renew(w, r, sb, ttl) {
		w.WriteHeader(http.StatusNoContent)
	}
}

// pause is POST /sandboxes/{id}/pause (sandboxd hibernate). Pausing a
// paused sandbox is 409, which the SDK reads as "already paused". A node
// that cannot hibernate the sandbox at all (the egress lane, volumes)
// answers 400: the request can never succeed, and a 409 would make the
// SDK report it as paused.
func (s *Server) pause(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.PauseRequest
	if !decodeBody(w, r, &req, true) {
		return
	}
	sb, _, ok := s.lookupCurrent(w, r, c)
	if !ok {
		return
	}
	if sb.Paused {
		writeError(w, http.StatusConflict, "sandbox is already paused")
		return
	}
	if err := s.fleet.Pause(r.Context(), sb); err != nil {
		var apiErr *sandboxd.APIError
		if errors.Is(err, sandboxd.ErrConflict) {
			msg := "this sandbox cannot be paused"
			switch {
			case sb.Key.Net == NetEgress:
				msg = "a sandbox with internet access stays running and cannot be paused; create it with allowInternetAccess: false to pause it"
			case errors.As(err, &apiErr) && apiErr.Message != "":
				msg += ": " + apiErr.Message
			}
			writeError(w, http.StatusBadRequest, msg)
			return
		}
		s.fleetError(w, err, "pause")
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// resume is the deprecated POST /sandboxes/{id}/resume: wake a paused
// sandbox (409 when it runs) with a fresh lease.
func (s *Server) resume(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.ResumeRequest
	if !decodeBody(w, r, &req, true) {
		return
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		writeError(w, http.StatusBadRequest, "timeout must not be negative")
		return
	}
	sb, _, ok := s.lookupCurrent(w, r, c)
	if !ok {
		return
	}
	// autoPause here switches what the new timeout does: pause (sandboxd
	// archives the sandbox) or kill. Absent keeps what the create chose.
	rn := fleet.Renewal{}
	if req.AutoPause != nil {
		rn.OnExpire = sandboxd.ExpireDestroy
		if *req.AutoPause {
			if sb.Key.Net == NetEgress {
				writeError(w, http.StatusBadRequest, noPauseOnEgress)
				return
			}
			rn.OnExpire = sandboxd.ExpireArchive
		}
	}
	if !sb.Paused {
		writeError(w, http.StatusConflict, "sandbox is not paused")
		return
	}
	if err := s.fleet.Resume(r.Context(), sb); err != nil {
		s.fleetError(w, err, "resume")
		return
	}
	sb.Paused = false // the renew below tells the view the sandbox as it is now
	rn.TTLSeconds = int(s.cfg.DefaultTimeout / time.Second)
	if req.Timeout != nil && *req.Timeout > 0 {
		rn.TTLSeconds = *req.Timeout
	}
	if !s.renewWith(w, r, sb, rn) {
		return
	}
	s.answerWithToken(w, r, sb, http.StatusCreated)
}

// connect is POST /v2/sandboxes/{id}/connect: wake the sandbox if paused
// (201) or leave it running (200), extend (never shorten) its lease to
// timeout seconds from now, and hand back its envd access token.
func (s *Server) connect(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.ConnectRequest
	if !decodeBody(w, r, &req, true) {
		return
	}
	if req.Timeout != nil && *req.Timeout < 0 {
		writeError(w, http.StatusBadRequest, "timeout must not be negative")
		return
	}
	sb, _, ok := s.lookupCurrent(w, r, c)
	if !ok {
		return
	}
	status := http.StatusOK
	if sb.Paused {
		if err := s.fleet.Resume(r.Context(), sb); err != nil {
			s.fleetError(w, err, "resume")
			return
		}
		sb.Paused = false // the renew below tells the view the sandbox as it is now
		status = http.StatusCreated
		// A resumed sandbox runs for the connect's timeout (the default when
		// it names none), not for whatever lease it was kept paused under.
		ttl := int(s.cfg.DefaultTimeout / time.Second)
		if req.Timeout != nil && *req.Timeout > 0 {
			ttl = *req.Timeout
		}
		if !s.renew(w, r, sb, ttl) {
			return
		}
	} else if req.Timeout != nil && *req.Timeout > 0 {
		// A running sandbox's lease only ever grows on connect.
		want := s.cfg.Clock.Now().Add(time.Duration(*req.Timeout) * time.Second)
		if want.After(sb.Deadline) && !s.renew(w, r, sb, *req.Timeout) {
			return
		}
	}
	s.answerWithToken(w, r, sb, status)
}

// answerWithToken answers e2b's Sandbox with the envd access token, which
// derives from the claim token the node keeps (read with the root token).
// It first hands envd that token (POST /init, see initEnvd): a sandbox
// that was not created through this surface (kubectl, another replica's
// secret rotation) may hold none yet, and an envd without one would check
// neither tokens nor signed URLs.
func (s *Server) answerWithToken(w http.ResponseWriter, r *http.Request, sb fleet.Sandbox, status int) {
	claimToken, err := s.fleet.Token(r.Context(), sb)
	if err != nil {
		s.fleetError(w, err, "read the sandbox's token")
		return
	}
	access := envdtoken.Derive(s.cfg.EnvdSecret, claimToken)
	if err := s.initEnvd(r.Context(), fleet.Claimed{Sandbox: sb, Token: claimToken}, access, nil); err != nil {
		s.log.Warn("e2b connect: initializing envd failed", "sandbox", sb.ID, "err", err)
		writeError(w, http.StatusBadGateway, "the sandbox's envd could not be initialized")
		return
	}
	var recp *records.Record
	if rec, ok := s.records.Of(r.Context(), sb); ok {
		recp = &rec
	}
	writeJSON(w, status, s.renderSandbox(sb, s.aliasOf(sb.Key, recp), access))
}
