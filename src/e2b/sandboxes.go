package e2b

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b/catalog"
	"github.com/cocoonstack/sandbox-operator/src/e2b/records"
	"github.com/cocoonstack/sandbox-operator/src/e2b/wire"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Net lanes a create maps allow_internet_access onto (sandboxd's pool key
// net axis).
const (
	// NetEgress is the lane with internet egress: e2b's default.
	NetEgress = "egress"
	// NetNone is the lane with no NIC at all.
	NetNone = "none"
)

func (s *Server) createSandbox(w http.ResponseWriter, r *http.Request, c caller) {
	var req wire.NewSandboxRequest
	if !decodeBody(w, r, &req, false) {
		return
	}
	if msg := validateCreate(&req); msg != "" {
		writeError(w, http.StatusBadRequest, msg)
		return
	}
	ttl := int(s.cfg.DefaultTimeout / time.Second)
	if req.Timeout != nil && *req.Timeout > 0 {
		ttl = *req.Timeout
	}
	src, err := s.resolveSource(r.Context(), c.namespace, req.TemplateID)
	switch {
	case errors.Is(err, errNoTemplate):
		writeError(w, http.StatusNotFound, fmt.Sprintf("template %q not found", req.TemplateID))
		return
	case err != nil:
		s.fleetError(w, err, "find the template")
		return
	}
	key, alias := src.Key, src.Alias
	switch {
	case src.Promoted != nil || src.Checkpoint != nil:
		// A published template and a snapshot keep the lane they were
		// made on: sandboxd publishes and checkpoints only isolated
		// sandboxes, so asking for internet access cannot be honoured.
		if req.AllowInternetAccess != nil && *req.AllowInternetAccess && key.Net != NetEgress {
			writeError(w, http.StatusBadRequest, "this template has no internet access (templates and snapshots are made on the isolated lane): leave allow_internet_access unset or false")
			return
		}
	default:
		key.Net = NetEgress
		if req.AllowInternetAccess != nil && !*req.AllowInternetAccess {
			key.Net = NetNone
		}
	}
	autoPause := req.AutoPause != nil && *req.AutoPause
	if autoPause && key.Net == NetEgress {
		writeError(w, http.StatusBadRequest, noPauseOnEgress)
		return
	}
	autoResume, _ := autoResumeOf(req.AutoResume)
	if autoResume && !autoPause {
		writeError(w, http.StatusBadRequest, "autoResume needs lifecycle onTimeout 'pause': only a paused sandbox can be woken by traffic")
		return
	}

	rec := records.Record{
		Namespace: c.namespace, Source: c.source, TemplateID: req.TemplateID, Alias: alias,
		Metadata: req.Metadata, Internet: req.AllowInternetAccess, AutoPause: autoPause, AutoResume: autoResume,
	}
	labels, err := records.Labels(rec)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}

	vols, ok := s.claimVolumes(w, r, req.VolumeMounts, src)
	if !ok {
		return
	}

	// Every refusal for the request's own sake is above: a malformed
	// create spends none of the caller's rate.
	admitted, ok := s.admitCreate(w, r, c)
	if !ok {
		return
	}
	created := false
	defer func() { admitted.Done(created) }()

	// allowInternetAccess false (or denyOut of everything, read into it
	// above) is sandboxd's "egress": false: no egress policy at all, on
	// top of the isolated lane.
	terms := claimTerms{noEgress: req.AllowInternetAccess != nil && !*req.AllowInternetAccess, volumes: vols}
	if autoPause {
		terms.onExpire = sandboxd.ExpireArchive
	}
	claimed, access, err := s.claimReady(r.Context(), c.namespace, src, key, ttl, labels, req.EnvVars, terms)
	if errors.Is(err, errEnvdInit) {
		writeError(w, http.StatusBadGateway, "the sandbox's envd could not be initialized; nothing was created")
		return
	}
	if err != nil {
		s.fleetError(w, err, "claim")
		return
	}
	rec.Deadline = claimed.Deadline
	s.records.Put(claimed.ID, rec)
	created = true
	writeJSON(w, http.StatusCreated, s.renderSandbox(claimed.Sandbox, alias, access))
}

// errEnvdInit: the claimed sandbox's envd could not be initialized, and the
// sandbox was given back.
var errEnvdInit = errors.New("initializing envd failed")

// claimReady claims a sandbox and hands its envd the access token and env
// vars. A node that stops answering between the claim and the init (it
// crashed or hangs) costs one node timeout and a claim elsewhere, not the
// create: the sandbox on it is given back in the background (retried until
// the node answers, fleet.Abandon) and the claim made once more. A checkpoint lives on one node, so its claim is not
// moved.
func (s *Server) claimReady(ctx context.Context, namespace string, src source, key sandbox.PoolKey, ttl int,
	labels, env map[string]string, terms claimTerms) (fleet.Claimed, string, error) {
	const attempts = 2
	for attempt := 1; ; attempt++ {
		claimed, err := s.claimSource(ctx, sandbox.ClaimRef{Namespace: namespace, Name: claimName()}, src, key, ttl, labels, terms)
		if err != nil {
			return fleet.Claimed{}, "", err
		}
		access := envdtoken.Derive(s.cfg.EnvdSecret, claimed.Token)
		err = s.initEnvd(ctx, claimed, access, env)
		if err == nil {
			return claimed, access, nil
		}
		s.log.Warn("e2b create: initializing envd failed; releasing the sandbox", "sandbox", claimed.ID, "attempt", attempt, "err", err)
		s.fleet.Abandon(claimed.Sandbox)
		if attempt == attempts || !errors.Is(err, errEnvdUnreachable) || src.Checkpoint != nil || ctx.Err() != nil {
			return fleet.Claimed{}, "", fmt.Errorf("%w: %w", errEnvdInit, err)
		}
	}
}

// validateCreate refuses what the fleet cannot honour, so no VM is spent
// on a create that would not do what it asked. It returns the 400 message.
// It also reads network.denyOut [0.0.0.0/0] into allow_internet_access
// false, the one network rule sandboxd's lanes express.
func validateCreate(req *wire.NewSandboxRequest) string {
	switch {
	case strings.TrimSpace(req.TemplateID) == "":
		return "templateID is required"
	}
	if err := catalog.ValidTemplateID(req.TemplateID); err != nil {
		return "invalid templateID: " + err.Error()
	}
	switch {
	case req.Timeout != nil && *req.Timeout < 0:
		return fmt.Sprintf("timeout must not be negative, got %d", *req.Timeout)
	case len(req.VolumeMounts) > sandboxd.MaxClaimVolumes:
		return fmt.Sprintf("at most %d volumeMounts", sandboxd.MaxClaimVolumes)
	case len(req.VolumeMounts) > 0 && req.AutoPause != nil && *req.AutoPause:
		return "a sandbox with volumes cannot be paused (sandboxd keeps it running): drop lifecycle onTimeout 'pause' or the volumeMounts"
	case isSet(req.IAM):
		return "iam tokens are not supported"
	}
	if _, err := autoResumeOf(req.AutoResume); err != nil {
		return err.Error()
	}
	if n := req.Network; n != nil {
		if deniesAllEgress(n) {
			// e2b documents denyOut [0.0.0.0/0] as allowInternetAccess
			// false: sandboxd's isolated lane, with no egress at all.
			if req.AllowInternetAccess != nil && *req.AllowInternetAccess {
				return "network.denyOut [0.0.0.0/0] denies all egress, which contradicts allow_internet_access true"
			}
			isolated := false
			req.AllowInternetAccess = &isolated
		} else if len(n.AllowOut) > 0 || len(n.DenyOut) > 0 || isSet(n.Rules) || isSet(n.EgressProxy) || (n.MaskRequestHost != nil && *n.MaskRequestHost != "") {
			return "network egress rules are not supported: sandboxd's egress is an allow-list the node operator sets per pool and per tenant class, " +
				"not per sandbox; choose the lane with allow_internet_access (false, or network.denyOut [\"0.0.0.0/0\"], is the isolated lane with no egress)"
		}
	}
	if len(req.EnvVars) > maxEnvVars {
		return fmt.Sprintf("at most %d envVars", maxEnvVars)
	}
	for k, v := range req.EnvVars {
		if !envNameRE.MatchString(k) {
			return fmt.Sprintf("invalid environment variable name %.64q: a name is 1-128 letters, digits and '_', not starting with a digit", k)
		}
		if strings.ContainsRune(v, 0) || len(v) > maxEnvValueBytes {
			return fmt.Sprintf("invalid value of environment variable %s: at most %d bytes, no NUL", k, maxEnvValueBytes)
		}
	}
	return ""
}

// The envVars bounds: a name is a shell identifier (what every shell and
// env file the guest writes can hold, and sandboxd's own rule for a
// claim's env), and a create carries a bounded environment.
var envNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`)

const (
	maxEnvVars       = 128
	maxEnvValueBytes = 32 << 10
)

// allTraffic is e2b's ALL_TRAFFIC, the CIDR of every IPv4 address.
const allTraffic = "0.0.0.0/0"

// deniesAllEgress reports whether n says only "deny all outbound
// traffic", the one egress rule sandboxd's lanes can honour.
func deniesAllEgress(n *wire.NetworkConfig) bool {
	return len(n.DenyOut) == 1 && strings.TrimSpace(n.DenyOut[0]) == allTraffic && len(n.AllowOut) == 0 &&
		!isSet(n.Rules) && !isSet(n.EgressProxy) && (n.MaskRequestHost == nil || *n.MaskRequestHost == "")
}

// autoResumeOf reads e2b's autoResume, {"enabled": bool}; absent or null
// is false.
func autoResumeOf(raw json.RawMessage) (bool, error) {
	if !isSet(raw) {
		return false, nil
	}
	var v struct {
		Enabled *bool `json:"enabled"`
	}
	if err := json.Unmarshal(raw, &v); err != nil || v.Enabled == nil {
		return false, errors.New(`autoResume must be {"enabled": true|false}`)
	}
	return *v.Enabled, nil
}

func isSet(raw []byte) bool {
	t := strings.TrimSpace(string(raw))
	return t != "" && t != "null" && t != "{}" && t != "[]"
}

// aliasFor is the alias a sandbox of key was created through: the one this
// process remembers, else the first alias (by name) that names key's image
// and size, so every replica reports the same one.
func (s *Server) aliasFor(key sandbox.PoolKey, rec *records.Record) string {
	if rec != nil && rec.Alias != "" {
		return rec.Alias
	}
	size := cmp.Or(key.Size, sandbox.DefaultSize)
	var found []string
	for a, t := range s.cfg.Aliases {
		if t.Image == key.Template && t.Size == size {
			found = append(found, a)
		}
	}
	if len(found) == 0 {
		return ""
	}
	slices.Sort(found)
	return found[0]
}

// renderSandbox is e2b's Sandbox for sb: what create, connect and resume
// answer, with the envd access token the caller uses from then on.
func (s *Server) renderSandbox(sb fleet.Sandbox, alias, access string) wire.SandboxResponse {
	traffic := envdtoken.Traffic(access)
	return wire.SandboxResponse{
		TemplateID: s.reportedTemplate(sb.Key), SandboxID: dnsID(sb.ID), Alias: alias, ClientID: clientID,
		EnvdVersion: s.cfg.EnvdVersion, EnvdAccessToken: access, TrafficAccessToken: &traffic, Domain: s.cfg.Domain,
	}
}

// releaseQuietly releases a sandbox the surface is abandoning, on its own
// deadline so a canceled request still cleans up.
func (s *Server) releaseQuietly(sb fleet.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), s.cfg.InitTimeout)
	defer cancel()
	if err := s.fleet.Release(ctx, sb); err != nil && !errors.Is(err, fleet.ErrNotFound) && !errors.Is(err, sandboxd.ErrNotFound) {
		s.log.Error("e2b: could not release an abandoned sandbox; its lease will reap it", "sandbox", sb.ID, "err", err)
	}
	s.records.Drop(sb.ID)
}

// listed renders a sandbox for a list or get.
func (s *Server) listed(ctx context.Context, sb fleet.Sandbox) wire.ListedSandbox {
	var recp *records.Record
	if rec, ok := s.records.Of(ctx, sb); ok {
		recp = &rec
	}
	// A list reports the tier's figures; a GET reads the node's own.
	res, ok := sandbox.SizeOf(sb.Key.Size)
	if !ok {
		res, _ = sandbox.SizeOf(sandbox.DefaultSize)
	}
	out := wire.ListedSandbox{
		TemplateID: s.reportedTemplate(sb.Key), Alias: s.aliasOf(sb.Key, recp), SandboxID: dnsID(sb.ID),
		ClientID: clientID, StartedAt: sb.ClaimedAt.UTC(), EndAt: sb.Deadline.UTC(),
		CPUCount: res.CPUCount, MemoryMB: res.MemoryMiB, State: wire.StateRunning, EnvdVersion: s.cfg.EnvdVersion,
		Metadata: map[string]string{},
	}
	if sb.Paused {
		out.State = wire.StatePaused
	}
	if recp != nil && recp.Metadata != nil {
		out.Metadata = recp.Metadata
	}
	return out
}

// listFilter is a list's query: metadata pairs, states, start time and
// template.
type listFilter struct {
	metadata     map[string]string
	states       map[string]bool
	startedAfter time.Time
	template     string
}

func (f *listFilter) match(s *Server, l *wire.ListedSandbox) bool {
	if !f.states[l.State] {
		return false
	}
	if !f.startedAfter.IsZero() && l.StartedAt.Before(f.startedAfter) {
		return false
	}
	if f.template != "" && f.template != l.TemplateID && f.template != l.Alias {
		if t, ok := s.cfg.Aliases[f.template]; !ok || t.Image != l.TemplateID {
			return false
		}
	}
	for k, v := range f.metadata {
		if got, ok := l.Metadata[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// parseMetadataQuery decodes e2b's metadata filter: a query string
// ("user=abc&app=prod") whose keys and values are each URL-encoded once
// more.
func parseMetadataQuery(raw string) (map[string]string, error) {
	if raw == "" {
		return nil, nil
	}
	q, err := url.ParseQuery(raw)
	if err != nil {
		return nil, fmt.Errorf("invalid metadata query: %w", err)
	}
	out := make(map[string]string, len(q))
	for k, vs := range q {
		key, err := url.QueryUnescape(k)
		if err != nil {
			return nil, fmt.Errorf("invalid metadata key %q: %w", k, err)
		}
		val, err := url.QueryUnescape(vs[len(vs)-1])
		if err != nil {
			return nil, fmt.Errorf("invalid metadata value for %q: %w", key, err)
		}
		out[key] = val
	}
	return out, nil
}

// listAll returns the caller's sandboxes that pass f, sorted by start
// time (then id) in the given direction.
func (s *Server) listAll(ctx context.Context, c caller, f *listFilter, desc bool) ([]wire.ListedSandbox, error) {
	start := s.cfg.Clock.Now()
	sbs, err := s.fleet.List(ctx, c.namespace)
	if err != nil {
		return nil, err
	}
	defer func() { s.cfg.Lists.ObserveList(s.cfg.Clock.Since(start), len(sbs)) }()
	out := make([]wire.ListedSandbox, 0, len(sbs))
	for _, sb := range sbs {
		if sb.Namespace != c.namespace {
			continue // a fleet must scope; never trust it to
		}
		l := s.listed(ctx, sb)
		if f.match(s, &l) {
			out = append(out, l)
		}
	}
	slices.SortFunc(out, func(a, b wire.ListedSandbox) int {
		c := cmp.Or(a.StartedAt.Compare(b.StartedAt), strings.Compare(a.SandboxID, b.SandboxID))
		if desc {
			return -c
		}
		return c
	})
	return out, nil
}

// listSandboxesV1 is GET /sandboxes: the running sandboxes, unpaginated.
func (s *Server) listSandboxesV1(w http.ResponseWriter, r *http.Request, c caller) {
	md, err := parseMetadataQuery(r.URL.Query().Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f := &listFilter{metadata: md, states: map[string]bool{wire.StateRunning: true}}
	out, err := s.listAll(r.Context(), c, f, false)
	if err != nil {
		s.fleetError(w, err, "list")
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// listSandboxesV2 is GET /v2/sandboxes: state filter, order and
// pagination by an opaque cursor in x-next-token.
func (s *Server) listSandboxesV2(w http.ResponseWriter, r *http.Request, c caller) {
	q := r.URL.Query()
	md, err := parseMetadataQuery(q.Get("metadata"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	f := &listFilter{metadata: md, states: map[string]bool{}, template: q.Get("template")}
	if f.template != "" {
		if err := catalog.ValidTemplateID(f.template); err != nil {
			writeError(w, http.StatusBadRequest, "invalid template: "+err.Error())
			return
		}
	}
	for _, v := range q["state"] {
		for _, st := range strings.Split(v, ",") {
			if st != wire.StateRunning && st != wire.StatePaused {
				writeError(w, http.StatusBadRequest, fmt.Sprintf("invalid state %q: want running or paused", st))
				return
			}
			f.states[st] = true
		}
	}
	if len(f.states) == 0 {
		f.states[wire.StateRunning], f.states[wire.StatePaused] = true, true
	}
	if v := q.Get("startedAfter"); v != "" {
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "startedAfter must be an RFC 3339 timestamp")
			return
		}
		f.startedAfter = t
	}
	desc := true
	switch q.Get("order") {
	case "", "desc":
	case "asc":
		desc = false
	default:
		writeError(w, http.StatusBadRequest, "order must be asc or desc")
		return
	}
	limit, after, ok := parsePage(w, q)
	if !ok {
		return
	}
	all, err := s.listAll(r.Context(), c, f, desc)
	if err != nil {
		s.fleetError(w, err, "list")
		return
	}
	start := 0
	if after != nil {
		start = sandbox.ResumeAfter(all, *after, func(l wire.ListedSandbox, c cursor) int { return c.compare(l.StartedAt, l.SandboxID, desc) })
	}
	page := all[start:min(start+limit, len(all))]
	if start+limit < len(all) {
		last := page[len(page)-1]
		w.Header().Set("X-Next-Token", cursor{at: last.StartedAt, id: last.SandboxID}.String())
	}
	writeJSON(w, http.StatusOK, page)
}

// parsePage reads a list's limit and nextToken; a bad one is answered 400.
func parsePage(w http.ResponseWriter, q url.Values) (limit int, after *cursor, ok bool) {
	if limit, ok = parseLimit(w, q.Get("limit")); !ok {
		return 0, nil, false
	}
	if v := q.Get("nextToken"); v != "" {
		cur, err := parseCursor(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "invalid nextToken")
			return 0, nil, false
		}
		after = &cur
	}
	return limit, after, true
}

func parseLimit(w http.ResponseWriter, raw string) (int, bool) {
	if raw == "" {
		return 100, true
	}
	n, err := strconv.Atoi(raw)
	if err != nil || n < 1 || n > 100 {
		writeError(w, http.StatusBadRequest, "limit must be a whole number from 1 to 100")
		return 0, false
	}
	return n, true
}

// cursor is the last item of a page: its start time and id. The next page
// starts after it in the list's order (sandbox.ResumeAfter), so items
// created or removed between pages never shift it.
type cursor struct {
	at time.Time
	id string
}

func (c cursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.at.UnixNano(), 10) + "," + c.id))
}

func parseCursor(s string) (cursor, error) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return cursor{}, err
	}
	ns, id, ok := strings.Cut(string(raw), ",")
	if !ok || id == "" {
		return cursor{}, errors.New("malformed cursor")
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return cursor{}, err
	}
	return cursor{at: time.Unix(0, n).UTC(), id: id}, nil
}

// compare orders the item (at, id) against the cursor in the list's order:
// negative when it comes before, so sandbox.ResumeAfter finds where the
// next page starts.
func (c cursor) compare(at time.Time, id string, desc bool) int {
	o := cmp.Or(at.Compare(c.at), strings.Compare(id, c.id))
	if desc {
		return -o
	}
	return o
}

func (s *Server) getSandbox(w http.ResponseWriter, r *http.Request, c caller) {
	sb, row, ok := s.lookupCurrent(w, r, c)
	if !ok {
		return
	}
	onExpire := ""                // the node's expiry action, when its row was read
	var mounts []wire.VolumeMount // the node's volumes, when its row was read
	if row != nil {
		onExpire = cmp.Or(row.OnExpire, sandboxd.ExpireDestroy)
		for _, v := range row.Volumes {
			mounts = append(mounts, wire.VolumeMount{Name: v.Name, Path: v.Mount})
		}
	}
	d := wire.SandboxDetail{ListedSandbox: s.listed(r.Context(), sb), Domain: s.cfg.Domain, VolumeMounts: mounts}
	if rec, ok := s.records.Of(r.Context(), sb); ok {
		d.AllowInternetAccess = rec.Internet
		if rec.Internet != nil && !*rec.Internet {
			d.Network = &wire.NetworkInfo{DenyOut: []string{allTraffic}}
		}
		d.Lifecycle = &wire.LifecycleInfo{AutoResume: rec.AutoResume, OnTimeout: "kill"}
		// The node's on_expire is what happens at the timeout; the
		// create's choice stands in when the row could not be read.
		if onExpire == sandboxd.ExpireArchive || onExpire == "" && rec.AutoPause {
			d.Lifecycle.OnTimeout = "pause"
		}
	}
	// The node knows the sandbox's real size; a failed read keeps the
	// size table's figures rather than failing the read.
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	if st, err := s.fleet.Stats(ctx, sb); err == nil && st.CPUCount > 0 {
		d.CPUCount, d.MemoryMB = st.CPUCount, int(st.MemTotalBytes>>20)
	}
	cancel()
	writeJSON(w, http.StatusOK, d)
}

func (s *Server) killSandbox(w http.ResponseWriter, r *http.Request, c caller) {
	sb, ok := s.lookup(w, r, c)
	if !ok {
		return
	}
	if err := s.fleet.Release(r.Context(), sb); err != nil {
		if errors.Is(err, fleet.ErrNotFound) || errors.Is(err, sandboxd.ErrNotFound) {
			s.records.Drop(sb.ID)
		}
		s.fleetError(w, err, "kill")
		return
	}
	s.records.Drop(sb.ID)
	w.WriteHeader(http.StatusNoContent)
}
