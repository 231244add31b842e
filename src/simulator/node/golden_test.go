package node_test

import (
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// goldenDir holds the sandboxd API document's examples (see its README).
// The simulator is checked against them, not against the client's structs,
// so a tag both sides share cannot drift unnoticed.
const goldenDir = "../../sandboxd/testdata/golden"

// staticMesh is a gossip view that always names the same peers.
type staticMesh []node.Peer

func (m staticMesh) Peers(*node.Node) []node.Peer { return m }

// Reasons a documented key may be absent from a simulator answer.
const (
	whyNoVolumes   = "absent for a claim without volumes (volume claims: golden_volumes_test.go)"
	whyNoDigest    = "absent for configured pools, cold boots, forks and checkpoints"
	whyNoCapacity  = "omitted while refill is not capacity-blocked"
	whyOrdinary    = "ordinary redirects omit require_promoted"
	whyRowOptional = "optional in the documented index row"
	whyNoTenant    = "absent when root made the checkpoint"
)

var (
	claimOptional = map[string]string{"template_digest": whyNoDigest, "volumes": whyNoVolumes}
	infoOptional  = map[string]string{"at_capacity": whyNoCapacity, "at_capacity_reason": whyNoCapacity}
	rowOptional   = map[string]string{
		"claimed_at": whyRowOptional, "archived": whyRowOptional, "from_checkpoint": whyRowOptional,
		"claim_ref": whyRowOptional, "volumes": whyNoVolumes,
		"metadata": whyRowOptional, "on_expire": whyRowOptional, "failed": whyRowOptional,
	}
)

func prefixed(prefix string, m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[prefix+k] = v
	}
	return out
}

// Every answer the simulator gives for a documented example has the
// example's keys at every level (less the listed optional ones, and no
// others) with the same JSON kinds, and RFC 3339 times where the example
// has one.
func TestAnswersMatchTheDocumentedExamples(t *testing.T) {
	peerCfg := testConfig()
	peerCfg.Name = "peer-node"
	peerCfg.Pools = append(peerCfg.Pools, sandboxd.PoolSpec{Template: "other:1", Warm: 1})
	peer := startNode(t, peerCfg)

	cfg := testConfig()
	cfg.Mesh = staticMesh{peer}
	n := startNode(t, cfg)
	api := "http://" + n.Addr()

	// Claim with the document's own body, less the volumes this node has
	// no catalog for.
	claimBody := goldenFixture(t, "claim.request.json").(map[string]any)
	delete(claimBody, "volumes")
	body := call(t, http.MethodPost, api+"/v1/claim", rootToken, mustJSON(t, claimBody), http.StatusOK)
	matchGolden(t, "claim.response.json", body, claimOptional)

	body = call(t, http.MethodPost, api+"/v1/claim", tenantB, []byte(`{"template":"`+tmpl+`","ttl_seconds":300,"claim_ref":"team-b/golden"}`), http.StatusOK)
	matchGolden(t, "claim.response.json", body, claimOptional)
	var cl sandboxd.ClaimResponse
	decode(t, body, &cl)
	own := "/v1/sandboxes/" + cl.ID

	// A warm miss with a warm peer redirects.
	body = call(t, http.MethodPost, api+"/v1/claim", rootToken, []byte(`{"template":"other:1"}`), http.StatusOK)
	matchGolden(t, "claim.redirect.response.json", body, map[string]string{"require_promoted": whyOrdinary})

	body = call(t, http.MethodPost, api+own+"/checkpoint", tenantB, []byte(`{"token":"`+cl.Token+`","name":"nightly"}`), http.StatusOK)
	matchGolden(t, "checkpoint.response.json", body, nil)
	body = call(t, http.MethodPost, api+own+"/checkpoint", rootToken, []byte(`{"token":"`+cl.Token+`"}`), http.StatusOK)
	matchGolden(t, "checkpoint.response.json", body, map[string]string{"checkpoint.tenant": whyNoTenant})
	var ck sandboxd.CheckpointResponse
	decode(t, body, &ck)

	body = call(t, http.MethodPost, api+"/v1/checkpoints/"+ck.Checkpoint.ID+"/claim", tenantB, goldenBytes(t, "checkpoint-claim.request.json"), http.StatusOK)
	matchGolden(t, "checkpoint-claim.response.json", body, map[string]string{})
	var branch sandboxd.ClaimResponse
	decode(t, body, &branch)

	// A checkpoint only the peer holds redirects there.
	peerClaim := call(t, http.MethodPost, "http://"+peer.Addr()+"/v1/claim", rootToken, []byte(`{"template":"`+tmpl+`"}`), http.StatusOK)
	var pc sandboxd.ClaimResponse
	decode(t, peerClaim, &pc)
	peerCk := call(t, http.MethodPost, "http://"+peer.Addr()+"/v1/sandboxes/"+pc.ID+"/checkpoint", rootToken, []byte(`{"token":"`+pc.Token+`"}`), http.StatusOK)
	var pck sandboxd.CheckpointResponse
	decode(t, peerCk, &pck)
	body = call(t, http.MethodPost, api+"/v1/checkpoints/"+pck.Checkpoint.ID+"/claim", rootToken, []byte(`{}`), http.StatusOK)
	matchGolden(t, "checkpoint-claim.redirect.response.json", body, nil)

	body = call(t, http.MethodPost, api+own+"/fork", tenantB, []byte(`{"token":"`+cl.Token+`","count":2,"ttl_seconds":300,"claim_ref_prefix":"team-b/"}`), http.StatusOK)
	matchGolden(t, "fork.response.json", body, nil)

	body = call(t, http.MethodPost, api+own+"/renew", cl.Token, goldenBytes(t, "renew.request.json"), http.StatusOK)
	matchGolden(t, "renew.response.json", body, nil)

	body = call(t, http.MethodGet, api+"/v1/sandboxes", rootToken, nil, http.StatusOK)
	matchGolden(t, "sandboxes.response.json", body, prefixed("sandboxes[].", rowOptional))
	for _, id := range []string{cl.ID, branch.ID} {
		body = call(t, http.MethodGet, api+"/v1/sandboxes/"+id, rootToken, nil, http.StatusOK)
		matchGolden(t, "sandbox.response.json", body, rowOptional)
	}

	body = call(t, http.MethodGet, api+own+"/stats", rootToken, nil, http.StatusOK)
	matchGolden(t, "stats.response.json", body, nil)
	body = call(t, http.MethodGet, api+own+"/owner", cl.Token, nil, http.StatusOK)
	matchGolden(t, "owner.response.json", body, nil)
	body = call(t, http.MethodGet, api+"/v1/peers", tenantA, nil, http.StatusOK)
	matchGolden(t, "peers.response.json", body, nil)

	body = call(t, http.MethodGet, api+"/v1/info", rootToken, nil, http.StatusOK)
	matchGolden(t, "info.response.json", body, infoOptional)
	matchGolden(t, "info.cluster.response.json", body, nil)
	body = call(t, http.MethodPut, api+"/v1/pools", rootToken, goldenBytes(t, "pools.request.json"), http.StatusOK)
	matchGolden(t, "info.response.json", body, infoOptional)
	body = call(t, http.MethodPost, api+"/v1/drain", rootToken, nil, http.StatusOK)
	matchGolden(t, "drain.response.json", body, nil)
	body = call(t, http.MethodDelete, api+"/v1/drain", rootToken, nil, http.StatusOK)
	matchGolden(t, "info.response.json", body, infoOptional)

	body = call(t, http.MethodGet, api+"/v1/sandboxes/sb_missing", rootToken, nil, http.StatusNotFound)
	matchGolden(t, "error.response.json", body, nil)
	body = call(t, http.MethodGet, api+"/v1/info", tenantA, nil, http.StatusForbidden)
	matchGolden(t, "error.response.json", body, nil)
	huge := append([]byte(`{"template":"`), bytes.Repeat([]byte("x"), 2<<20)...)
	body = call(t, http.MethodPost, api+"/v1/claim", rootToken, huge, http.StatusBadRequest)
	matchGolden(t, "error.body-too-large.response.json", body, nil)
	if !bytes.Equal(compact(t, body), compact(t, goldenBytes(t, "error.body-too-large.response.json"))) {
		t.Errorf("oversized body answer %s, the document says %s", body, goldenBytes(t, "error.body-too-large.response.json"))
	}
}

// The shape check itself fails on the drifts it exists to catch.
func TestGoldenShapeCheckCatchesDrift(t *testing.T) {
	for name, got := range map[string]string{
		"renamed key":   `{"ownerAddr":"10.0.0.5:7777"}`,
		"missing key":   `{}`,
		"wrong kind":    `{"owner_addr":7777}`,
		"extra key":     `{"owner_addr":"a:1","node":"n"}`,
		"nested rename": `{"checkpoint":{"id":"ck_1","name":"","sandboxId":"sb_1","key":{"template":"t","net":"none","size":"small"},"tenant":"t","created_at":"2026-07-06T00:00:00Z"}}`,
		"not a time":    `{"deadline":"tomorrow"}`,
	} {
		fixture := map[string]string{
			"nested rename": "checkpoint.response.json", "not a time": "renew.response.json",
		}[name]
		if fixture == "" {
			fixture = "owner.response.json"
		}
		if errs := shapeErrors(goldenFixture(t, fixture), parse(t, []byte(got)), nil); len(errs) == 0 {
			t.Errorf("%s: %s passed as %s", name, got, fixture)
		}
	}
}

func call(t *testing.T, method, url, token string, body []byte, want int) []byte {
	t.Helper()
	code, out := rawDo(t, method, url, token, body, map[string]string{"Content-Type": "application/json"})
	if code != want {
		t.Fatalf("%s %s: %d %s, want %d", method, url, code, out, want)
	}
	return []byte(out)
}

func goldenBytes(t *testing.T, name string) []byte {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(goldenDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func goldenFixture(t *testing.T, name string) any { return parse(t, goldenBytes(t, name)) }

func parse(t *testing.T, raw []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("parse %s: %v", raw, err)
	}
	return v
}

func decode(t *testing.T, raw []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

func compact(t *testing.T, raw []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// matchGolden checks one answer against the named fixture. optional lists
// the fixture keys the answer may leave out, with the reason.
func matchGolden(t *testing.T, fixture string, got []byte, optional map[string]string) {
	t.Helper()
	want := goldenFixture(t, fixture)
	for path, why := range optional {
		if why == "" || !hasPath(want, strings.Split(path, ".")) {
			t.Fatalf("%s: optional key %q is not in the fixture or has no reason", fixture, path)
		}
	}
	for _, e := range shapeErrors(want, parse(t, got), optional) {
		t.Errorf("%s vs %s: %s", fixture, got, e)
	}
}

func hasPath(v any, path []string) bool {
	obj, ok := v.(map[string]any)
	if !ok {
		return false
	}
	key, each := strings.CutSuffix(path[0], "[]")
	child, ok := obj[key]
	if !ok || len(path) == 1 {
		return ok
	}
	if each {
		arr, _ := child.([]any)
		return len(arr) > 0 && hasPath(arr[0], path[1:])
	}
	return hasPath(child, path[1:])
}

func shapeErrors(want, got any, optional map[string]string) []string {
	var errs []string
	matchShape("", want, got, optional, &errs)
	return errs
}

// matchShape compares kinds, not values: objects by key set, arrays by
// matching every element of got against the fixture's first element.
func matchShape(path string, want, got any, optional map[string]string, errs *[]string) {
	at := path
	if at == "" {
		at = "$"
	}
	if kind(want) != kind(got) {
		*errs = append(*errs, at+": want a "+kind(want)+", got a "+kind(got))
		return
	}
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		for k := range g {
			if _, ok := w[k]; !ok {
				*errs = append(*errs, join(path, k)+": key the document does not have")
			}
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				if _, opt := optional[join(path, k)]; !opt {
					*errs = append(*errs, join(path, k)+": documented key missing")
				}
				continue
			}
			matchShape(join(path, k), wv, gv, optional, errs)
		}
	case []any:
		g := got.([]any)
		if len(w) == 0 {
			return
		}
		if len(g) == 0 {
			*errs = append(*errs, at+": empty, so its elements go unchecked")
		}
		for _, el := range g {
			matchShape(path+"[]", w[0], el, optional, errs)
		}
	case string:
		if _, err := time.Parse(time.RFC3339, w); err == nil {
			if _, err := time.Parse(time.RFC3339, got.(string)); err != nil {
				*errs = append(*errs, at+": want an RFC 3339 time, got "+got.(string))
			}
		}
	case json.Number:
		if isInt(w) && !isInt(got.(json.Number)) {
			*errs = append(*errs, at+": want an integer, got "+got.(json.Number).String())
		}
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func isInt(n json.Number) bool { return !strings.ContainsAny(n.String(), ".eE") }

func kind(v any) string {
	switch v.(type) {
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case json.Number:
		return "number"
	case bool:
		return "bool"
	case nil:
		return "null"
	}
	return "?"
}
