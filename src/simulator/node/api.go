package node

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// maxRequestBody is the contract's cap on request bodies.
const maxRequestBody = 1 << 20

// Handler is the node's HTTP API. Start serves it; tests and benchmarks
// may drive it directly.
func (n *Node) Handler() http.Handler {
	mux := http.NewServeMux()
	// handle registers a route, or, for a verb the node is configured
	// without (Config.Without), Go's plain 404, as an older sandboxd that
	// never had the route answers it.
	handle := func(pattern string, h http.HandlerFunc) {
		if slices.Contains(n.cfg.Without, pattern) {
			h = http.NotFound
		}
		mux.HandleFunc(pattern, h)
	}
	handle("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
	})
	handle("GET /metrics", n.handleMetrics)
	handle("POST /v1/claim", n.handleClaim)
	handle("GET /v1/info", n.handleInfo)
	handle("PUT /v1/pools", n.handlePools)
	handle("POST /v1/drain", n.handleDrain(true))
	handle("DELETE /v1/drain", n.handleDrain(false))
	handle("GET /v1/peers", n.handlePeers)
	handle("GET /v1/volumes", n.handleVolumes)
	handle("PUT /v1/templates/labels", n.handleTemplateLabels)
	handle("GET /v1/tenants", n.handleTenants)
	handle("PUT /v1/tenants", n.handleReplaceTenants)
	handle("PUT /v1/tenants/{name}", n.handlePutTenant)
	handle("DELETE /v1/tenants/{name}", n.handleDeleteTenant)
	handle("GET /v1/sandboxes", n.handleSandboxes)
	handle("GET /v1/sandboxes/{id}", n.handleSandbox)
	handle("GET /v1/sandboxes/{id}/stats", n.handleStats)
	handle("GET /v1/sandboxes/{id}/owner", n.handleOwner)
	handle("GET /v1/sandboxes/{id}/ports/{port}", n.servePort)
	handle("POST /v1/sandboxes/{id}/release", n.handleRelease)
	handle("POST /v1/sandboxes/{id}/hibernate", n.handleHibernate)
	handle("POST /v1/sandboxes/{id}/wake", n.handleWake)
	handle("POST /v1/sandboxes/{id}/renew", n.handleRenew)
	handle("POST /v1/sandboxes/{id}/exec", n.handleExec)
	handle("GET /v1/sandboxes/{id}/env", n.handleGetEnv)
	handle("PUT /v1/sandboxes/{id}/env", n.handleSetEnv(false))
	handle("PATCH /v1/sandboxes/{id}/env", n.handleSetEnv(true))
	handle("POST /v1/sandboxes/{id}/fork", n.handleFork)
	handle("POST /v1/sandboxes/{id}/checkpoint", n.handleCheckpoint)
	handle("POST /v1/sandboxes/{id}/promote", n.handlePromote)
	handle("DELETE /v1/templates", n.handleDeleteTemplate)
	handle("GET /v1/checkpoints", n.handleCheckpoints)
	handle("DELETE /v1/checkpoints/{id}", n.handleDeleteCheckpoint)
	handle("POST /v1/checkpoints/{id}/claim", n.handleCheckpointClaim)
	handle("HEAD /v1/checkpoints/{id}/blob", n.handleCheckpointProbe)
	// A path sandboxd has no route for gets Go's plain-text 404, not an
	// API error: the client tells "no such verb on this node" from "no
	// such sandbox" by it.
	mux.HandleFunc("/", http.NotFound)
	return mux
}

// nodeCaller authenticates a "node API token" endpoint: root, tenant, or
// anyone on an open node. Anything else is answered 401.
func (n *Node) nodeCaller(w http.ResponseWriter, r *http.Request) (caller, bool) {
	c := n.creds.identify(bearerToken(r))
	if c.kind == callerNone {
		writeError(w, errUnauthorized)
		return c, false
	}
	return c, true
}

// operatorCaller authenticates a root-only surface: a valid tenant token
// is authenticated but not authorized (403), an unknown one 401.
func (n *Node) operatorCaller(w http.ResponseWriter, r *http.Request) (caller, bool) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return c, false
	}
	if !c.operator() {
		writeError(w, errForbidden)
		return c, false
	}
	return c, true
}

// decodeBody reads a JSON body capped at 1 MiB. An empty body is allowed
// only where the contract says an absent body means the defaults.
func decodeBody(w http.ResponseWriter, r *http.Request, v any, allowEmpty bool) *apiError {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		return errBadBody
	}
	if len(raw) == 0 {
		if allowEmpty {
			return nil
		}
		return errBadBody
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return errBadBody
	}
	return nil
}

// claimBody is the claim request. RawMetadata shadows
// ClaimRequest.Metadata so decodeMetadata sees the bytes as sent.
type claimBody struct {
	sandboxd.ClaimRequest
	RawMetadata json.RawMessage `json:"metadata"`
	RawEnv      json.RawMessage `json:"env"` // decoded as sent: checkClaimOptions
}

func (n *Node) handleClaim(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	var body claimBody
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	// Before any redirect: a body refused here is refused everywhere.
	vols, aerr := n.resolveVolumes(c, body.Volumes, body.VolumesAttachOnly)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	body.Volumes = vols
	md, aerr := decodeMetadata(body.RawMetadata)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	body.Metadata = md
	if aerr := checkClaimOptions(&body.ClaimRequest, body.RawEnv); aerr != nil {
		writeError(w, aerr)
		return
	}
	resp, err := n.claimWithVolumes(r.Context(), c, body.ClaimRequest)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (n *Node) handleInfo(w http.ResponseWriter, r *http.Request) {
	if _, ok := n.operatorCaller(w, r); !ok {
		return
	}
	if intro, ok := n.cfg.Mesh.(Introductions); ok {
		if v := r.Header.Get(IntroductionHeader); v != "" {
			intro.Introduce(strings.Split(v, ","))
		}
	}
	if frozen := n.frozenInfo.Load(); frozen != nil {
		writeJSON(w, http.StatusOK, frozen)
		return
	}
	writeJSON(w, http.StatusOK, n.info())
}

// poolSpecBody catches the config-owned fields the API refuses.
type poolSpecBody struct {
	sandboxd.PoolSpec
	Egress json.RawMessage `json:"egress"`
	Warmup json.RawMessage `json:"warmup"`
}

func (n *Node) handlePools(w http.ResponseWriter, r *http.Request) {
	if _, ok := n.operatorCaller(w, r); !ok {
		return
	}
	var body struct {
		Pools []poolSpecBody `json:"pools"`
	}
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	specs := make([]sandboxd.PoolSpec, 0, len(body.Pools))
	for _, p := range body.Pools {
		if p.Egress != nil || p.Warmup != nil {
			writeError(w, errorf(http.StatusBadRequest, "egress and warmup are config-owned"))
			return
		}
		specs = append(specs, p.PoolSpec)
	}
	info, err := n.applyPools(specs)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, info)
}

func (n *Node) handleDrain(on bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if _, ok := n.operatorCaller(w, r); !ok {
			return
		}
		writeJSON(w, http.StatusOK, n.drain(on))
	}
}

func (n *Node) handlePeers(w http.ResponseWriter, r *http.Request) {
	if _, ok := n.nodeCaller(w, r); !ok {
		return
	}
	peers := n.peerAddrs()
	if peers == nil {
		peers = []string{}
	}
	writeJSON(w, http.StatusOK, sandboxd.PeersResponse{Peers: peers})
}

func (n *Node) handleMetrics(w http.ResponseWriter, r *http.Request) {
	if _, ok := n.operatorCaller(w, r); !ok {
		return
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4; charset=utf-8")
	_, _ = io.WriteString(w, n.renderMetrics())
}

func (n *Node) handleSandboxes(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	ref := q.Get("claim_ref")
	want, aerr := metadataFilter(q)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	n.mu.Lock()
	rows := make([]sandboxd.Sandbox, 0, len(n.sandboxes))
	for _, sb := range n.sandboxes {
		if c.kind == callerTenant && sb.tenant != c.tenant {
			continue
		}
		if ref != "" && sb.claimRef != ref {
			continue
		}
		if !holdsMetadata(sb.metadata, want) {
			continue
		}
		rows = append(rows, sb.row(false))
	}
	n.mu.Unlock()
	slices.SortFunc(rows, func(a, b sandboxd.Sandbox) int {
		if d := a.ClaimedAt.Compare(*b.ClaimedAt); d != 0 {
			return d
		}
		return cmp.Compare(a.ID, b.ID)
	})
	writeJSON(w, http.StatusOK, sandboxd.SandboxList{Sandboxes: rows})
}

func (n *Node) handleSandbox(w http.ResponseWriter, r *http.Request) {
	n.stats.sandboxGets.Add(1)
	c, ok := n.operatorCaller(w, r)
	if !ok {
		return
	}
	n.mu.Lock()
	sb := n.sandboxes[r.PathValue("id")]
	var row sandboxd.Sandbox
	if sb != nil {
		// Only the configured api_token carries per-sandbox authority.
		row = sb.row(c.kind == callerRoot)
	}
	n.mu.Unlock()
	if sb == nil {
		writeError(w, errNotFound)
		return
	}
	writeJSON(w, http.StatusOK, row)
}

func (n *Node) handleStats(w http.ResponseWriter, r *http.Request) {
	if _, ok := n.operatorCaller(w, r); !ok {
		return
	}
	st, err := n.sandboxStats(r.PathValue("id"))
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, st)
}

func (n *Node) handleOwner(w http.ResponseWriter, r *http.Request) {
	n.stats.ownerLookups.Add(1)
	n.mu.Lock()
	_, err := n.sandboxByTokenLocked(r.PathValue("id"), bearerToken(r), false)
	n.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxd.OwnerResponse{OwnerAddr: n.addr})
}

func (n *Node) handleRelease(w http.ResponseWriter, r *http.Request) {
	respondEmpty(w, n.release(r.PathValue("id"), bearerToken(r)))
}

func (n *Node) handleHibernate(w http.ResponseWriter, r *http.Request) {
	respondEmpty(w, n.hibernate(r.PathValue("id"), bearerToken(r)))
}

func (n *Node) handleWake(w http.ResponseWriter, r *http.Request) {
	respondEmpty(w, n.wake(r.PathValue("id"), bearerToken(r)))
}

func respondEmpty(w http.ResponseWriter, err *apiError) {
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (n *Node) handleRenew(w http.ResponseWriter, r *http.Request) {
	var body sandboxd.RenewRequest
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	deadline, err := n.renew(r.PathValue("id"), bearerToken(r), body.TTLSeconds, body.OnExpire)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxd.RenewResponse{Deadline: deadline})
}

func (n *Node) handleFork(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	var body sandboxd.ForkRequest
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	children, err := n.fork(c, r.PathValue("id"), body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxd.ForkResponse{Children: children})
}

func (n *Node) handleCheckpoint(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	var body sandboxd.CheckpointRequest
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	ck, err := n.createCheckpoint(c, r.PathValue("id"), body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, sandboxd.CheckpointResponse{Checkpoint: ck})
}

func (n *Node) handlePromote(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	var body sandboxd.PromoteRequest
	if err := decodeBody(w, r, &body, false); err != nil {
		writeError(w, err)
		return
	}
	res, err := n.promote(c, r.PathValue("id"), body)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// handleDeleteTemplate takes the key as a claim does (net and size
// default); a holder elsewhere in the mesh is named in the claim redirect
// shape.
func (n *Node) handleDeleteTemplate(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	key, ok := templateKeyOf(w, q)
	if !ok {
		return
	}
	noRedirect, _ := strconv.ParseBool(q.Get("no_redirect"))
	holders, err := n.deleteTemplate(c, key, q.Get("digest"), noRedirect)
	switch {
	case err != nil:
		writeError(w, err)
	case len(holders) > 0:
		writeJSON(w, http.StatusOK, sandboxd.ClaimResponse{Redirect: holders})
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

func (n *Node) handleCheckpoints(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, sandboxd.CheckpointList{Checkpoints: n.listCheckpoints(c)})
}

func (n *Node) handleDeleteCheckpoint(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	respondEmpty(w, n.deleteCheckpoint(c, r.PathValue("id")))
}

// checkpointClaimBody is the checkpoint claim request with its metadata as
// sent (see claimBody).
type checkpointClaimBody struct {
	sandboxd.CheckpointClaimRequest
	RawMetadata json.RawMessage `json:"metadata"`
	RawEnv      json.RawMessage `json:"env"`
}

func (n *Node) handleCheckpointClaim(w http.ResponseWriter, r *http.Request) {
	c, ok := n.nodeCaller(w, r)
	if !ok {
		return
	}
	var body checkpointClaimBody
	if err := decodeBody(w, r, &body, true); err != nil {
		writeError(w, err)
		return
	}
	md, aerr := decodeMetadata(body.RawMetadata)
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	body.Metadata = md
	// A checkpoint's key never refuses archive: the egress lane and volume
	// claims take no checkpoints.
	if aerr := checkOnExpire(body.OnExpire, sandbox.PoolKey{}, nil); aerr != nil {
		writeError(w, aerr)
		return
	}
	if body.Env, aerr = decodeEnv(body.RawEnv); aerr != nil {
		writeError(w, aerr)
		return
	}
	resp, err := n.claimCheckpoint(r.Context(), c, r.PathValue("id"), body.CheckpointClaimRequest)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// handleCheckpointProbe is the keyless-mesh ownership probe: the id is the
// only capability.
func (n *Node) handleCheckpointProbe(w http.ResponseWriter, r *http.Request) {
	if n.HasCheckpoint(r.PathValue("id")) {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.WriteHeader(http.StatusNotFound)
}

// templateKeyOf reads a promoted template's key from the query of the
// template verbs (delete, labels): net and size default like a claim's,
// and the template is required. ok is false when the answer was written.
func templateKeyOf(w http.ResponseWriter, q url.Values) (sandbox.PoolKey, bool) {
	key := sandbox.PoolKey{Template: q.Get("template"), Net: q.Get("net"), Size: q.Get("size")}.WithDefaults()
	if key.Template == "" {
		writeError(w, errorf(http.StatusBadRequest, "template is required"))
		return key, false
	}
	return key, true
}
