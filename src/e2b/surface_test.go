package e2b_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestHealthNeedsNoKey(t *testing.T) {
	e := newEnv(t, envOptions{})
	if r := e.do(t, http.MethodGet, "/health", "", nil); r.status != http.StatusOK {
		t.Errorf("GET /health = %d", r.status)
	}
	if r := e.do(t, http.MethodGet, "/no/such/thing", keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("unknown path = %d, want 404", r.status)
	} else {
		r.errorMessage(t)
	}
}

func TestAuthentication(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, key := range []string{"", "not-a-key", keyA + "x", strings.ToUpper(keyA)} {
		for _, c := range []struct{ method, path string }{
			{http.MethodGet, "/sandboxes"}, {http.MethodGet, "/v2/sandboxes"},
			{http.MethodPost, "/v2/sandboxes"}, {http.MethodPost, "/sandboxes"},
			{http.MethodGet, "/sandboxes/sb-abc"}, {http.MethodDelete, "/sandboxes/sb-abc"},
			{http.MethodPost, "/sandboxes/sb-abc/pause"}, {http.MethodPost, "/v2/sandboxes/sb-abc/connect"},
			{http.MethodGet, "/snapshots"}, {http.MethodDelete, "/templates/ck_abc"},
		} {
			r := e.do(t, c.method, c.path, key, `{"templateID":"base"}`)
			if r.status != http.StatusUnauthorized {
				t.Errorf("%s %s with key %q = %d, want 401", c.method, c.path, key, r.status)
				continue
			}
			r.errorMessage(t)
		}
	}
	// Authorization: Bearer is not how the SDK sends its key.
	req, _ := http.NewRequest(http.MethodGet, e.url+"/v2/sandboxes", nil)
	req.Header.Set("Authorization", "Bearer "+keyA)
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("bearer key = %d, want 401", resp.StatusCode)
	}
	if r := e.do(t, http.MethodGet, "/v2/sandboxes", keyA, nil); r.status != http.StatusOK {
		t.Errorf("good key = %d %s", r.status, r.body)
	}
}

func TestAnonymousLandsInTheDefaultNamespace(t *testing.T) {
	e := newEnv(t, envOptions{anon: true})
	c := e.create(t, "", nil)
	if r := e.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, "anything", nil); r.status != http.StatusOK {
		t.Errorf("anonymous get = %d %s", r.status, r.body)
	}
	id, _ := sandbox.CanonicalID(c.SandboxID)
	for _, addr := range e.fleet.Addrs() {
		cl, _ := sandboxd.New(addr, sandboxd.WithToken(rootToken))
		if row, err := cl.Sandbox(context.Background(), id); err == nil {
			if !strings.HasPrefix(row.ClaimRef, "default/e2b-") {
				t.Errorf("claim_ref = %q, want default/e2b-…", row.ClaimRef)
			}
		}
	}
}

func TestSandboxLifecycle(t *testing.T) {
	e := newEnv(t, envOptions{})
	before := time.Now()
	c := e.create(t, keyA, map[string]any{
		"templateID": "base", "timeout": 120,
		"metadata": map[string]string{"user": "alice", "app": "a b&c"},
		"envVars":  map[string]string{"GREETING": "hello", "EMPTY": ""},
	})
	if !strings.HasPrefix(c.SandboxID, "sb-") {
		t.Errorf("sandboxID %q is not the DNS spelling", c.SandboxID)
	}
	if c.TemplateID != image || c.Alias != "base" || c.Domain != domain || c.EnvdVersion != e2b.DefaultEnvdVersion || c.ClientID == "" {
		t.Errorf("create answer = %+v", c)
	}
	id, _ := sandbox.CanonicalID(c.SandboxID)
	token, _ := e.claimToken(t, id)
	if c.EnvdAccessToken != derived(token) || strings.Contains(string(mustJSON(t, c)), token) {
		t.Errorf("envdAccessToken is not the derived token, or the claim token leaked")
	}

	// The env vars reached envd before the create answered.
	r := e.envdGet(t, id, c.EnvdAccessToken, "/envs")
	var envs map[string]string
	r.decode(t, &envs)
	if envs["GREETING"] != "hello" || envs["EMPTY"] != "" {
		t.Errorf("envd envs = %v", envs)
	}

	// Get, in both spellings.
	for _, spelling := range []string{c.SandboxID, id} {
		r := e.do(t, http.MethodGet, "/sandboxes/"+spelling, keyA, nil)
		if r.status != http.StatusOK {
			t.Fatalf("get %s = %d %s", spelling, r.status, r.body)
		}
		var got listed
		r.decode(t, &got)
		if got.SandboxID != c.SandboxID || got.State != "running" || got.Metadata["app"] != "a b&c" ||
			got.TemplateID != image || got.Alias != "base" || got.CPUCount != 1 || got.MemoryMB != 1024 ||
			got.Domain != domain || got.EnvdVersion == "" {
			t.Errorf("get = %+v", got)
		}
		if got.EndAt.Before(before.Add(110*time.Second)) || got.EndAt.After(time.Now().Add(130*time.Second)) {
			t.Errorf("endAt %v is not the 120 s lease", got.EndAt)
		}
	}

	// Timeout renews the lease on the node, shorter or longer.
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/timeout", keyA, `{"timeout": 3000}`); r.status != http.StatusNoContent {
		t.Fatalf("timeout = %d %s", r.status, r.body)
	}
	if d := e.deadline(t, id); d.Before(time.Now().Add(2900 * time.Second)) {
		t.Errorf("deadline after timeout 3000 = %v", d)
	}
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/refreshes", keyA, ""); r.status != http.StatusNoContent {
		t.Fatalf("refresh = %d %s", r.status, r.body)
	}
	if d := e.deadline(t, id); d.After(time.Now().Add(310*time.Second)) || d.Before(time.Now().Add(280*time.Second)) {
		t.Errorf("deadline after a bare refresh = %v, want the 300 s default", d)
	}

	// Pause, pause again (409), connect wakes (201), connect again (200).
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/pause", keyA, `{}`); r.status != http.StatusNoContent {
		t.Fatalf("pause = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/pause", keyA, `{}`); r.status != http.StatusConflict {
		t.Fatalf("second pause = %d %s, want 409", r.status, r.body)
	}
	var st listed
	e.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, keyA, nil).decode(t, &st)
	if st.State != "paused" {
		t.Errorf("state after pause = %q", st.State)
	}
	r = e.do(t, http.MethodPost, "/v2/sandboxes/"+c.SandboxID+"/connect", keyA, `{"timeout": 600}`)
	if r.status != http.StatusCreated {
		t.Fatalf("connect to paused = %d %s, want 201", r.status, r.body)
	}
	var conn created
	r.decode(t, &conn)
	if conn.SandboxID != c.SandboxID || conn.EnvdAccessToken != c.EnvdAccessToken || conn.Domain != domain {
		t.Errorf("connect answer = %+v", conn)
	}
	if d := e.deadline(t, id); d.Before(time.Now().Add(590 * time.Second)) {
		t.Errorf("connect did not extend the lease: %v", d)
	}
	r = e.do(t, http.MethodPost, "/v2/sandboxes/"+c.SandboxID+"/connect", keyA, `{"timeout": 10}`)
	if r.status != http.StatusOK {
		t.Fatalf("connect to running = %d %s, want 200", r.status, r.body)
	}
	if d := e.deadline(t, id); d.Before(time.Now().Add(500 * time.Second)) {
		t.Errorf("connect shortened the lease: %v", d)
	}
	// The deprecated resume refuses a running sandbox, and wakes a paused one.
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/resume", keyA, `{"timeout": 60}`); r.status != http.StatusConflict {
		t.Errorf("resume running = %d, want 409", r.status)
	}
	e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/pause", keyA, "")
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/resume", keyA, `{"timeout": 60}`); r.status != http.StatusCreated {
		t.Errorf("resume paused = %d %s, want 201", r.status, r.body)
	}

	// Metrics: one point from the node.
	r = e.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID+"/metrics", keyA, nil)
	var ms []map[string]any
	r.decode(t, &ms)
	if r.status != http.StatusOK || len(ms) != 1 || ms[0]["cpuCount"].(float64) != 1 || ms[0]["memTotal"].(float64) != 1<<30 {
		t.Errorf("metrics = %d %s", r.status, r.body)
	}

	// Kill, then everything about it is 404.
	if r := e.do(t, http.MethodDelete, "/sandboxes/"+c.SandboxID, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("kill = %d %s", r.status, r.body)
	}
	if n := e.live(t); n != 0 {
		t.Errorf("%d claims left after kill", n)
	}
	for _, c2 := range []struct{ method, path string }{
		{http.MethodGet, ""}, {http.MethodDelete, ""}, {http.MethodPost, "/pause"},
		{http.MethodPost, "/timeout"}, {http.MethodGet, "/metrics"}, {http.MethodPost, "/v2connect"},
	} {
		path := "/sandboxes/" + c.SandboxID + c2.path
		body := ""
		if c2.path == "/timeout" || c2.path == "/v2connect" {
			body = `{"timeout": 10}`
		}
		if c2.path == "/v2connect" {
			path = "/v2/sandboxes/" + c.SandboxID + "/connect"
		}
		if r := e.do(t, c2.method, path, keyA, body); r.status != http.StatusNotFound {
			t.Errorf("%s %s after kill = %d, want 404", c2.method, path, r.status)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// deadline reads a sandbox's lease straight from its node.
func (e *env) deadline(t *testing.T, id string) time.Time {
	t.Helper()
	for _, addr := range e.fleet.Addrs() {
		cl, _ := sandboxd.New(addr, sandboxd.WithToken(rootToken))
		if row, err := cl.Sandbox(context.Background(), id); err == nil {
			return row.Deadline
		}
	}
	t.Fatalf("sandbox %s is on no node", id)
	return time.Time{}
}

func TestOtherNamespaceIsIndistinguishableFromUnknown(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.create(t, keyA, map[string]any{"metadata": map[string]string{"owner": "a"}})
	unknown := "sb-doesnotexist0000"
	for _, op := range []struct{ method, suffix, body string }{
		{http.MethodGet, "", ""}, {http.MethodDelete, "", ""},
		{http.MethodPost, "/pause", ""}, {http.MethodPost, "/resume", "{}"},
		{http.MethodPost, "/timeout", `{"timeout":5}`}, {http.MethodPost, "/refreshes", ""},
		{http.MethodGet, "/metrics", ""}, {http.MethodPost, "/snapshots", "{}"},
		{http.MethodPost, "/connect", "{}"},
	} {
		theirs := e.do(t, op.method, "/sandboxes/"+c.SandboxID+op.suffix, keyB, op.body)
		none := e.do(t, op.method, "/sandboxes/"+unknown+op.suffix, keyB, op.body)
		if theirs.status != http.StatusNotFound || none.status != http.StatusNotFound || string(theirs.body) != string(none.body) {
			t.Errorf("%s %s: other namespace %d %q vs unknown %d %q", op.method, op.suffix, theirs.status, theirs.body, none.status, none.body)
		}
	}
	// Lists are scoped too.
	var list []listed
	e.do(t, http.MethodGet, "/v2/sandboxes", keyB, nil).decode(t, &list)
	if len(list) != 0 {
		t.Errorf("team-b lists %d sandboxes", len(list))
	}
	e.do(t, http.MethodGet, "/v2/sandboxes", keyA, nil).decode(t, &list)
	if len(list) != 1 || list[0].SandboxID != c.SandboxID {
		t.Errorf("team-a lists %+v", list)
	}
	// The sandbox is alive after team-b's attempts.
	if r := e.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, keyA, nil); r.status != http.StatusOK {
		t.Errorf("team-a get = %d", r.status)
	}
	// A malformed id is the same 404.
	if r := e.do(t, http.MethodGet, "/sandboxes/not_an_id", keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("malformed id = %d", r.status)
	}
}

func TestCreateRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	for name, body := range map[string]string{
		"bad JSON":                    `{"templateID":`,
		"trailing data":               `{"templateID":"base"} {}`,
		"unknown field":               `{"templateID":"base","flavour":"x"}`,
		"no template":                 `{"timeout":10}`,
		"negative timeout":            `{"templateID":"base","timeout":-1}`,
		"auto pause":                  `{"templateID":"base","autoPause":true}`,
		"volume mounts":               `{"templateID":"base","volumeMounts":[{"name":"v","path":"/v"}]}`,
		"egress rules":                `{"templateID":"base","network":{"denyOut":["10.0.0.0/8"]}}`,
		"resume without pause":        `{"templateID":"base","allow_internet_access":false,"autoResume":{"enabled":true}}`,
		"resume not an object":        `{"templateID":"base","allow_internet_access":false,"autoPause":true,"autoResume":true}`,
		"bad env name":                `{"templateID":"base","envVars":{"A=B":"1"}}`,
		"env name with newline":       `{"templateID":"base","envVars":{"A\nB":"1"}}`,
		"env name with a digit first": `{"templateID":"base","envVars":{"1A":"1"}}`,
		"env value with NUL":          `{"templateID":"base","envVars":{"A":"a\u0000b"}}`,
		"empty body":                  ``,
		"huge metadata":               `{"templateID":"base","metadata":{"k":"` + strings.Repeat("x", 17<<10) + `"}}`,
		"oversized body":              `{"templateID":"base","metadata":{"k":"` + strings.Repeat("x", 2<<20) + `"}}`,
		"wrong type":                  `{"templateID":"base","timeout":"soon"}`,
		"metadata not string":         `{"templateID":"base","metadata":{"k":1}}`,
	} {
		r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s: create = %d %s, want 400", name, r.status, r.body)
			continue
		}
		r.errorMessage(t)
	}
	if n := e.live(t); n != 0 {
		t.Errorf("refused creates spent %d claims", n)
	}
}

func TestDrainedPoolIs429(t *testing.T) {
	e := newEnv(t, envOptions{})
	// No node has a pool for this image, and the simulator refuses it.
	r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, `{"templateID":"nothing-warm","allow_internet_access":false}`)
	if r.status == http.StatusCreated {
		// The simulator cold-boots unknown templates; drain instead.
		t.Log("simulator cold-booted the unpooled template")
	}
	for _, n := range e.fleet.Nodes() {
		cl, _ := sandboxd.New(n.Addr(), sandboxd.WithToken(rootToken))
		if _, err := cl.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	r = e.do(t, http.MethodPost, "/v2/sandboxes", keyA, `{"templateID":"base","allow_internet_access":false}`)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") == "" {
		t.Fatalf("create on a drained fleet = %d (Retry-After %q) %s, want 429 with Retry-After", r.status, r.header.Get("Retry-After"), r.body)
	}
	r.errorMessage(t)
}

// recordingFleet passes every call to the real fleet and keeps the claim
// requests, so a test can see what the surface asked for.
type recordingFleet struct {
	e2b.Fleet
	mu     sync.Mutex
	claims []fleet.ClaimRequest
}

func (f *recordingFleet) Claim(ctx context.Context, req fleet.ClaimRequest) (fleet.Claimed, error) {
	f.mu.Lock()
	f.claims = append(f.claims, req)
	f.mu.Unlock()
	return f.Fleet.Claim(ctx, req)
}

func TestTemplateLaneAndTimeoutResolution(t *testing.T) {
	rec := &recordingFleet{}
	e := newEnv(t, envOptions{fleet: func(f e2b.Fleet) e2b.Fleet { rec.Fleet = f; return rec }})
	e.create(t, keyDef, map[string]any{"templateID": "base"})
	e.create(t, keyDef, map[string]any{"templateID": "big", "timeout": 42})
	e.create(t, keyDef, map[string]any{"templateID": image, "timeout": 0})
	// Internet access (the SDK's default when it sends nothing) asks for
	// the egress lane, which the simulator has no attachment for.
	r := e.do(t, http.MethodPost, "/v2/sandboxes", keyDef, `{"templateID":"base"}`)
	if r.status == http.StatusCreated {
		t.Errorf("an egress claim succeeded on a fleet without egress: %s", r.body)
	}
	e.do(t, http.MethodPost, "/v2/sandboxes", keyDef, `{"templateID":"base","allow_internet_access":true}`)

	// Each claim carries what its create recorded as labels: the alias
	// it named and the internet choice when the create made one; no
	// internet is sandboxd's "egress": false as well as the lane.
	want := []fleet.ClaimRequest{
		{Ref: sandbox.ClaimRef{Namespace: "default"}, Front: metrics.FrontE2B, Key: sandbox.PoolKey{Template: image, Net: "none", Size: "small"}, TTLSeconds: 300,
			Metadata: map[string]string{"e2b.alias": "base", "e2b.internet": "false"}, NoEgress: true},
		{Ref: sandbox.ClaimRef{Namespace: "default"}, Front: metrics.FrontE2B, Key: sandbox.PoolKey{Template: image, Net: "none", Size: "medium"}, TTLSeconds: 42,
			Metadata: map[string]string{"e2b.alias": "big", "e2b.internet": "false"}, NoEgress: true},
		{Ref: sandbox.ClaimRef{Namespace: "default"}, Front: metrics.FrontE2B, Key: sandbox.PoolKey{Template: image, Net: "none", Size: "small"}, TTLSeconds: 300,
			Metadata: map[string]string{"e2b.internet": "false"}, NoEgress: true},
		{Ref: sandbox.ClaimRef{Namespace: "default"}, Front: metrics.FrontE2B, Key: sandbox.PoolKey{Template: image, Net: "egress", Size: "small"}, TTLSeconds: 300,
			Metadata: map[string]string{"e2b.alias": "base"}},
		{Ref: sandbox.ClaimRef{Namespace: "default"}, Front: metrics.FrontE2B, Key: sandbox.PoolKey{Template: image, Net: "egress", Size: "small"}, TTLSeconds: 300,
			Metadata: map[string]string{"e2b.alias": "base", "e2b.internet": "true"}},
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if len(rec.claims) != len(want) {
		t.Fatalf("claims = %+v", rec.claims)
	}
	names := map[string]bool{}
	for i, got := range rec.claims {
		if !strings.HasPrefix(got.Ref.Name, "e2b-") || names[got.Ref.Name] || len(got.Ref.Name) > 63 {
			t.Errorf("claim name %q is not a fresh e2b-… DNS label", got.Ref.Name)
		}
		names[got.Ref.Name] = true
		got.Ref.Name = ""
		if !reflect.DeepEqual(got, want[i]) {
			t.Errorf("claim %d = %+v, want %+v", i, got, want[i])
		}
	}
}

func TestInitFailureReleasesTheSandbox(t *testing.T) {
	e := newEnv(t, envOptions{noEnvd: true})
	r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, `{"templateID":"base","allow_internet_access":false,"envVars":{"A":"1"}}`)
	if r.status != http.StatusBadGateway {
		t.Fatalf("create with env vars and no envd = %d %s, want 502", r.status, r.body)
	}
	r.errorMessage(t)
	e.waitReleased(t)
	var list []listed
	e.do(t, http.MethodGet, "/v2/sandboxes", keyA, nil).decode(t, &list)
	if len(list) != 0 {
		t.Errorf("list after a failed create = %+v", list)
	}
	// Every create initializes envd (its access token), so without an envd
	// even a create with no env vars fails, and leaves nothing behind.
	r = e.do(t, http.MethodPost, "/v2/sandboxes", keyA, `{"templateID":"base","allow_internet_access":false}`)
	if r.status != http.StatusBadGateway {
		t.Fatalf("create with no envd = %d %s, want 502", r.status, r.body)
	}
	e.waitReleased(t)
}

// waitReleased waits until the fleet holds no claims: a failed create
// releases its half-made sandbox.
func (e *env) waitReleased(t testing.TB) {
	t.Helper()
	poll.UntilNil(t, "the half-made sandbox to be released", func() error {
		if n := e.live(t); n != 0 {
			return fmt.Errorf("the fleet holds %d claims", n)
		}
		return nil
	})
}

func TestListFiltersAndPagination(t *testing.T) {
	e := newEnv(t, envOptions{warm: 8})
	var ids []string
	for i := range 5 {
		c := e.create(t, keyA, map[string]any{"metadata": map[string]string{"i": fmt.Sprint(i), "group": "g w&x", "even": fmt.Sprint(i%2 == 0)}})
		ids = append(ids, c.SandboxID)
	}
	other := e.create(t, keyB, map[string]any{"metadata": map[string]string{"group": "g w&x"}})
	e.do(t, http.MethodPost, "/sandboxes/"+ids[1]+"/pause", keyA, "")

	// Pages of two, newest first, through x-next-token.
	var seen []string
	next := ""
	for page := 0; ; page++ {
		q := url.Values{"limit": {"2"}}
		if next != "" {
			q.Set("nextToken", next)
		}
		r := e.do(t, http.MethodGet, "/v2/sandboxes?"+q.Encode(), keyA, nil)
		if r.status != http.StatusOK {
			t.Fatalf("page %d = %d %s", page, r.status, r.body)
		}
		var items []listed
		r.decode(t, &items)
		for _, it := range items {
			seen = append(seen, it.SandboxID)
		}
		next = r.header.Get("X-Next-Token")
		if next == "" {
			break
		}
		if page > 5 {
			t.Fatal("pagination does not end")
		}
	}
	if len(seen) != 5 {
		t.Fatalf("paged through %v", seen)
	}
	for i := range seen {
		if seen[i] != ids[len(ids)-1-i] {
			t.Errorf("page order = %v, want newest first %v", seen, ids)
			break
		}
	}

	// The SDK's metadata encoding: pairs URL-encoded, then the whole.
	md := url.Values{url.QueryEscape("group"): {url.QueryEscape("g w&x")}, "even": {"true"}}.Encode()
	var items []listed
	r := e.do(t, http.MethodGet, "/v2/sandboxes?metadata="+url.QueryEscape(md), keyA, nil)
	r.decode(t, &items)
	if r.status != http.StatusOK || len(items) != 3 {
		t.Errorf("metadata filter = %d, %d items", r.status, len(items))
	}
	for _, it := range items {
		if it.Metadata["even"] != "true" || it.SandboxID == other.SandboxID {
			t.Errorf("metadata filter let through %+v", it)
		}
	}

	e.do(t, http.MethodGet, "/v2/sandboxes?state=paused", keyA, nil).decode(t, &items)
	if len(items) != 1 || items[0].SandboxID != ids[1] || items[0].State != "paused" {
		t.Errorf("state=paused = %+v", items)
	}
	e.do(t, http.MethodGet, "/v2/sandboxes?state=running,paused&order=asc", keyA, nil).decode(t, &items)
	if len(items) != 5 || items[0].SandboxID != ids[0] {
		t.Errorf("state=running,paused&order=asc = %d items", len(items))
	}
	// v1 lists the running ones only.
	e.do(t, http.MethodGet, "/sandboxes", keyA, nil).decode(t, &items)
	if len(items) != 4 {
		t.Errorf("v1 list = %d items, want the 4 running", len(items))
	}
	for name, q := range map[string]string{
		"bad state": "state=sleeping", "bad limit": "limit=0", "big limit": "limit=101",
		"bad order": "order=up", "bad token": "nextToken=!!!", "bad time": "startedAfter=yesterday",
	} {
		if r := e.do(t, http.MethodGet, "/v2/sandboxes?"+q, keyA, nil); r.status != http.StatusBadRequest {
			t.Errorf("%s: list = %d, want 400", name, r.status)
		}
	}
}

func TestSnapshots(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.create(t, keyA, nil)
	r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/snapshots", keyA, `{"name":"first"}`)
	if r.status != http.StatusCreated {
		t.Fatalf("snapshot = %d %s", r.status, r.body)
	}
	var snap struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	r.decode(t, &snap)
	if !strings.HasPrefix(snap.SnapshotID, "ck_") || len(snap.Names) != 1 || snap.Names[0] != "first" {
		t.Errorf("snapshot = %+v", snap)
	}
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/snapshots", keyA, `{"name":"bad/name"}`); r.status != http.StatusBadRequest {
		t.Errorf("bad snapshot name = %d", r.status)
	}
	e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/snapshots", keyA, ``)

	var list []struct {
		SnapshotID string   `json:"snapshotID"`
		Names      []string `json:"names"`
	}
	e.do(t, http.MethodGet, "/snapshots", keyA, nil).decode(t, &list)
	if len(list) != 2 {
		t.Errorf("team-a snapshots = %+v", list)
	}
	e.do(t, http.MethodGet, "/snapshots?name=first&sandboxID="+c.SandboxID, keyA, nil).decode(t, &list)
	if len(list) != 1 || list[0].SnapshotID != snap.SnapshotID {
		t.Errorf("filtered snapshots = %+v", list)
	}
	r = e.do(t, http.MethodGet, "/snapshots?limit=1", keyA, nil)
	if r.header.Get("X-Next-Token") == "" {
		t.Errorf("a full page of snapshots carries no next token")
	}
	e.do(t, http.MethodGet, "/snapshots", keyB, nil).decode(t, &list)
	if len(list) != 0 {
		t.Errorf("team-b sees team-a's snapshots: %+v", list)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+snap.SnapshotID, keyB, nil); r.status != http.StatusNotFound {
		t.Errorf("team-b deletes team-a's snapshot: %d", r.status)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+snap.SnapshotID, keyA, nil); r.status != http.StatusNoContent {
		t.Errorf("delete snapshot = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+snap.SnapshotID, keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("second delete = %d", r.status)
	}
	if r := e.do(t, http.MethodDelete, "/templates/base", keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("delete a template = %d", r.status)
	}
}

func TestLifecycleBodyRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.create(t, keyA, nil)
	p := "/sandboxes/" + c.SandboxID
	for name, tc := range map[string]struct{ path, body string }{
		"timeout missing":   {p + "/timeout", `{}`},
		"timeout negative":  {p + "/timeout", `{"timeout":-5}`},
		"timeout unknown":   {p + "/timeout", `{"timeout":5,"x":1}`},
		"refresh too long":  {p + "/refreshes", `{"duration":3601}`},
		"refresh negative":  {p + "/refreshes", `{"duration":-1}`},
		"connect negative":  {"/v2" + p + "/connect", `{"timeout":-1}`},
		"connect bad JSON":  {"/v2" + p + "/connect", `{"timeout":`},
		"pause unknown":     {p + "/pause", `{"hard":true}`},
		"snapshot bad JSON": {p + "/snapshots", `[`},
	} {
		r := e.do(t, http.MethodPost, tc.path, keyA, tc.body)
		if r.status != http.StatusBadRequest {
			t.Errorf("%s = %d %s, want 400", name, r.status, r.body)
		}
	}
}

// The fleet errors the surface maps, through a fleet that fails on demand.
type failingFleet struct {
	e2b.Fleet
	err error
}

func (f failingFleet) List(context.Context, string) ([]fleet.Sandbox, error) { return nil, f.err }

func TestFleetFailuresMapToStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want int
	}{
		{fleet.ErrNotFound, http.StatusNotFound},
		{fmt.Errorf("x: %w", sandboxd.ErrCapacity), http.StatusTooManyRequests},
		{&sandboxd.APIError{Status: 400, Message: "bad key"}, http.StatusBadRequest},
		{&sandboxd.APIError{Status: 409, Message: "busy"}, http.StatusConflict},
		{&sandboxd.APIError{Status: 503}, http.StatusServiceUnavailable},
		{context.DeadlineExceeded, http.StatusServiceUnavailable},
		{&sandboxd.APIError{Status: 500, Message: "provisioning failed"}, http.StatusServiceUnavailable},
		{&sandboxd.APIError{Status: 404, Unsupported: true}, http.StatusNotImplemented},
		{&sandboxd.APIError{Status: 412}, http.StatusConflict},
		// A node that cannot be reached is a 503 in both fronts (one
		// vocabulary, fleet.Classify).
		{errors.New("dial tcp 10.0.0.7:7777: refused"), http.StatusServiceUnavailable},
	} {
		e := newEnv(t, envOptions{fleet: func(f e2b.Fleet) e2b.Fleet { return failingFleet{Fleet: f, err: tc.err} }})
		r := e.do(t, http.MethodGet, "/v2/sandboxes", keyA, nil)
		if r.status != tc.want {
			t.Errorf("%v: list = %d, want %d", tc.err, r.status, tc.want)
		}
		if strings.Contains(string(r.body), "10.0.0.7") {
			t.Errorf("the answer names a node address: %s", r.body)
		}
	}
}

// TestEnvdGetsTheAccessToken: an envd that starts without a token (as a
// real one does) holds the derived token after a create through the
// surface, and after a connect to a sandbox claimed some other way (a
// kubectl create): from then on it refuses requests without the token.
func TestEnvdGetsTheAccessToken(t *testing.T) {
	e := newEnv(t, envOptions{tokenlessEnvd: true})
	c := e.create(t, keyA, nil)
	id, _ := sandbox.CanonicalID(c.SandboxID)
	if r := e.envdGet(t, id, "", "/envs"); r.status != http.StatusUnauthorized {
		t.Errorf("envd without a token after create = %d, want 401", r.status)
	}
	if r := e.envdGet(t, id, c.EnvdAccessToken, "/envs"); r.status != http.StatusOK {
		t.Errorf("envd with the token create returned = %d, want 200", r.status)
	}

	// A sandbox claimed straight from a node, in team-a, as kubectl would.
	cl, err := sandboxd.New(e.fleet.Addrs()[0], sandboxd.WithToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	claim, err := cl.Claim(context.Background(), sandboxd.ClaimRequest{Template: image, ClaimRef: "team-a/from-kubectl"})
	if err != nil {
		t.Fatal(err)
	}
	if r := e.envdGet(t, claim.ID, "", "/envs"); r.status != http.StatusOK {
		t.Fatalf("a fresh tokenless envd = %d, want 200", r.status)
	}
	var conn created
	r := e.do(t, http.MethodPost, "/sandboxes/"+claim.ID+"/connect", keyA, `{"timeout":60}`)
	if r.status != http.StatusOK {
		t.Fatalf("connect = %d %s", r.status, r.body)
	}
	r.decode(t, &conn)
	if conn.EnvdAccessToken != derived(claim.Token) {
		t.Fatalf("connect returned a token that does not derive from the claim")
	}
	if r := e.envdGet(t, claim.ID, "", "/envs"); r.status != http.StatusUnauthorized {
		t.Errorf("envd without a token after connect = %d, want 401", r.status)
	}
	if r := e.envdGet(t, claim.ID, conn.EnvdAccessToken, "/envs"); r.status != http.StatusOK {
		t.Errorf("envd with the token connect returned = %d, want 200", r.status)
	}
}
