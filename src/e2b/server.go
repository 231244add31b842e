package e2b

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/e2b/admission"
	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/buildstore"
	"github.com/cocoonstack/sandbox-operator/src/e2b/catalog"
	"github.com/cocoonstack/sandbox-operator/src/e2b/records"
	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

const (
	// maxBodyBytes bounds every request body; the largest legitimate one
	// is a create with its metadata and env vars.
	maxBodyBytes = 1 << 20
	// apiKeyHeader is how the SDK presents its key.
	apiKeyHeader = "X-API-KEY"
	// clientID fills e2b's deprecated clientID; it names nothing, so it
	// tells a caller nothing about the fleet.
	clientID = "sandboxd"
	// claimNamePrefix starts the name of every claim this surface makes,
	// so kubectl get sandboxes shows which ones came through e2b.
	claimNamePrefix = "e2b-"
)

// Server serves e2b's control REST API over a Fleet. It is an http.Handler.
type Server struct {
	cfg   Config
	fleet Fleet
	log   *slog.Logger
	// records are what each sandbox's create chose (metadata, alias,
	// lifecycle), cached in front of its claim labels.
	records *records.Store
	admit   *admission.CreateGate
	catalog *catalog.Catalog
	// builds is nil when the build API is off.
	builds *build.Manager
	// snapshotLocks and uploadLocks serialize the quota checks of a
	// namespace's snapshots and uploads (see admission.KeyedLock).
	snapshotLocks admission.KeyedLock
	uploadLocks   admission.KeyedLock
	uploads       *admission.UploadsInFlight
	// table is what mux serves, kept so Routes can list it.
	table []route
	mux   *http.ServeMux

	closeOnce sync.Once
}

var _ http.Handler = (*Server)(nil)

// NewServer builds the surface.
func NewServer(cfg Config, f Fleet, logger *slog.Logger) (*Server, error) {
	if f == nil {
		return nil, errors.New("e2b: a fleet is required")
	}
	if logger != nil {
		cfg.Logger = logger
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, log: cfg.Logger,
		admit: admission.NewCreateGate(rate.Limit(max(cfg.CreateRate, 0)), cfg.CreateBurst, max(cfg.MaxSandboxes, 0), cfg.Clock)}
	s.fleet = newLiveFleet(f, cfg.Clock, func(sb fleet.Sandbox) {
		s.log.Info("e2b: releasing a sandbox whose machine failed", "sandbox", sb.ID, "reason", sb.Failed)
		s.records.Drop(sb.ID)
	})
	f = s.fleet
	s.catalog = catalog.New(f, cfg.Clock, cfg.Logger)
	s.records = records.NewStore(cfg.MaxTracked, f, cfg.Clock, cfg.Logger)
	if b := cfg.Builds; b != nil {
		clk, _ := cfg.Clock.(clock.Clock)
		s.builds = build.NewManager(build.Config{
			Parallel: b.Parallel, Timeout: b.Timeout, LogLines: b.LogLines, Clock: clk, Logger: cfg.Logger,
			Expired: s.dropExpiredUploads, Observer: b.Observer,
		}, s.runBuild)
		s.uploads = &admission.UploadsInFlight{}
		if d, ok := b.Store.(interface{ SetAdmission(buildstore.Admission) }); ok {
			d.SetAdmission(s.admitUpload)
		}
	}
	s.table = s.routes()
	mux := http.NewServeMux()
	for _, r := range s.table {
		mux.Handle(r.pattern, r.handler)
	}
	s.mux = mux
	return s, nil
}

// Close stops the builds under way; call it when the surface stops
// serving.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		if s.builds != nil {
			s.builds.Close()
		}
	})
}

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mux.ServeHTTP(w, r)
}

func (s *Server) serveHealth(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
}

// caller is an authenticated request's scope.
type caller struct {
	namespace string
	// client names the caller for the create rate: its key's digest, or
	// the source address of an anonymous caller (see sourceAddr).
	client string
	// anonymous callers are told apart by source address: the live-sandbox
	// cap counts, per source, only the sandboxes it created.
	anonymous bool
	source    string
}

// scope names what the caller's live-sandbox cap counts: a key's
// namespace (keys sharing one share the cap), or an anonymous source.
func (c caller) scope() string {
	if c.anonymous {
		return "addr:" + c.source
	}
	return "ns:" + c.namespace
}

type handlerFunc func(w http.ResponseWriter, r *http.Request, c caller)

// authed resolves the caller's namespace from X-API-KEY and bounds the
// request's fleet work. A missing or unknown key is 401, unless the
// surface serves anonymous callers and has no key file at all; a key that
// is presented must be a real one whenever there is a key file.
func (s *Server) authed(h handlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get(apiKeyHeader)
		var c caller
		switch ns, digest, ok := s.cfg.Keys.lookup(key); {
		case ok:
			c.namespace, c.client = ns, "key:"+hex.EncodeToString(digest[:])
		case s.cfg.AllowAnonymous && (key == "" || s.cfg.Keys.Len() == 0):
			c.namespace, c.anonymous, c.source = s.cfg.Namespace, true, sourceAddr(r)
			c.client = "addr:" + c.source
		default:
			writeError(w, http.StatusUnauthorized, "missing or invalid API key (send it as X-API-KEY)")
			return
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		s.countValidation(w, r.WithContext(ctx), c, h)
	})
}

// lookup finds the path's sandbox in the caller's namespace; an id that is
// malformed, unknown or another namespace's is the same 404.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, c caller) (fleet.Sandbox, bool) {
	raw := r.PathValue("sandboxID")
	id, ok := sandbox.CanonicalID(raw)
	if !ok {
		writeNotFound(w)
		return fleet.Sandbox{}, false
	}
	sb, err := s.fleet.Find(r.Context(), c.namespace, id)
	if err != nil {
		s.fleetError(w, err, "get")
		return fleet.Sandbox{}, false
	}
	return sb, true
}

// lookupCurrent is lookup with the sandbox as its node has it now: the
// view may not yet know that traffic woke it (autoResume) or that the node
// archived it at its timeout (onTimeout "pause"). row is nil when the node
// could not be read; the view's copy then stands. A sandbox its node no
// longer holds is 404.
func (s *Server) lookupCurrent(w http.ResponseWriter, r *http.Request, c caller) (sb fleet.Sandbox, row *sandboxd.Sandbox, ok bool) {
	sb, ok = s.lookup(w, r, c)
	if !ok {
		return sb, nil, false
	}
	ctx, cancel := context.WithTimeout(r.Context(), rowReadTimeout)
	defer cancel()
	cur, row, err := s.fleet.Current(ctx, sb)
	switch {
	case err == nil:
		return cur, row, true
	case errors.Is(err, fleet.ErrNotFound):
		// Reaped or released since the view heard of it, or its machine
		// failed.
		writeGone(w, err)
		return sb, nil, false
	}
	return sb, nil, true
}

// rowReadTimeout bounds the read of a sandbox's row off its node, so a
// slow node costs a stale state, not the request.
const rowReadTimeout = 5 * time.Second

// decodeBody reads a bounded JSON body into v, refusing unknown fields and
// trailing data. An empty body is accepted when optional.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			writeError(w, http.StatusBadRequest, fmt.Sprintf("request body larger than %d bytes", maxBodyBytes))
			return false
		}
		writeError(w, http.StatusBadRequest, "could not read the request body")
		return false
	}
	if len(strings.TrimSpace(string(raw))) == 0 {
		if optional {
			return true
		}
		writeError(w, http.StatusBadRequest, "a JSON request body is required")
		return false
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeError(w, http.StatusBadRequest, "invalid JSON body: "+err.Error())
		return false
	}
	if dec.More() {
		writeError(w, http.StatusBadRequest, "invalid JSON body: trailing data after the object")
		return false
	}
	return true
}

// writeJSON answers status with v.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// writeError answers status with e2b's {"code","message"} body.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, wire.ErrorBody{Code: status, Message: msg})
}

func writeNotFound(w http.ResponseWriter) {
	writeError(w, http.StatusNotFound, "sandbox not found")
}

// fleetError answers a Fleet failure of op. Each kind gets a fixed or
// caller-facing message; whatever else the error says (node addresses)
// goes to the log only.
func (s *Server) fleetError(w http.ResponseWriter, err error, op string) {
	reason := fleet.Reason(err)
	switch kind := fleet.Classify(err); kind {
	case fleet.KindNotFound, fleet.KindNoTemplate:
		writeGone(w, err)
	case fleet.KindCapacity:
		s.cfg.Refusals.Refused(metrics.ReasonCapacity)
		w.Header().Set("Retry-After", strconv.Itoa(s.cfg.RetryAfterSeconds))
		writeError(w, http.StatusTooManyRequests, "no warm sandbox is available for this template now; retry later")
	case fleet.KindInvalid:
		writeError(w, http.StatusBadRequest, cmp.Or(reason, "the request was refused as invalid"))
	case fleet.KindConflict:
		msg := "the sandbox cannot " + op + " in its current state"
		if reason != "" {
			msg += ": " + reason
		}
		writeError(w, http.StatusConflict, msg)
	case fleet.KindPrecondition:
		writeError(w, http.StatusConflict, "it changed while this request ran; read it again and retry")
	case fleet.KindUnsupported:
		s.log.Warn("e2b: a node does not serve a verb", "op", op, "err", err)
		writeError(w, http.StatusNotImplemented, "the sandbox's node cannot "+op+": it runs an older sandboxd without that verb")
	case fleet.KindTimeout, fleet.KindCanceled:
		s.log.Warn("e2b fleet call timed out", "op", op, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the fleet did not answer "+op+" in time; retry")
	case fleet.KindUnavailable:
		s.log.Warn("e2b fleet call failed", "op", op, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the sandbox's node could not "+op+" now; retry")
	case fleet.KindRefused:
		s.log.Error("e2b: a node refused this server's sandboxd token", "op", op, "err", err)
		writeError(w, http.StatusServiceUnavailable, "the sandbox's node could not "+op+" now; retry")
	default:
		s.log.Error("e2b fleet call failed", "op", op, "err", err)
		writeError(w, http.StatusInternalServerError, op+" failed")
	}
}

// claimName is a fresh DNS-1123 name for a claim: the prefix and 16
// random base32 characters (80 bits), lowercased.
func claimName() string {
	return claimNamePrefix + strings.ToLower(rand.Text()[:16])
}

func dnsID(id string) string {
	if d, ok := sandbox.DNSID(id); ok {
		return d
	}
	return id
}
