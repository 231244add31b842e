package e2b_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/mesh"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const (
	rootToken = "e2b-test-root"
	image     = "ghcr.io/example/e2b-rt:24.04"
	keyA      = "key-for-team-a"
	keyB      = "key-for-team-b"
	keyDef    = "key-for-default"
	domain    = "sandbox.example.test"
)

var envdSecret = []byte("e2b-test-envd-secret")

// env is a simulated fleet with envd guests, the test *fleet.Fleet over it, and
// the surface on a loopback server.
type env struct {
	fleet *simfleet.Fleet
	srv   *e2b.Server
	url   string
	http  *http.Client
}

type envOptions struct {
	warm   int
	noEnvd bool
	// tokenlessEnvd starts every guest without an access token, as a real
	// envd starts before anything calls its POST /init.
	tokenlessEnvd bool
	anon          bool // serve anonymous callers instead of keys
	fleet         func(e2b.Fleet) e2b.Fleet
	// config adjusts the surface's Config.
	config func(*e2b.Config)
	// volumes is every node's volume catalog.
	volumes []node.Volume
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.warm == 0 {
		o.warm = 4
	}
	cfg := simfleet.Config{
		Nodes:     2,
		RootToken: rootToken,
		EchoPorts: []int{},
		Pools: []sandboxd.PoolSpec{
			{Template: image, Net: "none", Size: "small", Warm: o.warm},
			{Template: image, Net: "none", Size: "medium", Warm: 1},
		},
		Volumes: o.volumes,
	}
	switch {
	case o.tokenlessEnvd:
		cfg.Envd = &simfleet.EnvdConfig{}
	case !o.noEnvd:
		cfg.Envd = &simfleet.EnvdConfig{Secret: envdSecret}
	}
	f, err := simfleet.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for _, n := range f.Nodes() {
		if err := n.WaitWarm(ctx, sandbox.PoolKey{Template: image, Net: "none", Size: "small"}, o.warm); err != nil {
			t.Fatal(err)
		}
	}
	var fl e2b.Fleet = newFleet(t, f)
	if o.fleet != nil {
		fl = o.fleet(fl)
	}
	keys, err := e2b.ParseAPIKeys([]byte(keyA+" team-a\n"+keyB+" team-b\n"+keyDef+"\n"), "default")
	if err != nil {
		t.Fatal(err)
	}
	aliases, err := e2b.ParseAliases([]byte("base " + image + "\nbig " + image + " medium\n"))
	if err != nil {
		t.Fatal(err)
	}
	scfg := e2b.Config{
		Namespace: "default", Domain: domain, Aliases: aliases, EnvdSecret: envdSecret, Keys: keys,
	}
	if o.anon {
		scfg.Keys, scfg.AllowAnonymous = e2b.APIKeys{}, true
	}
	if o.config != nil {
		o.config(&scfg)
	}
	srv, err := e2b.NewServer(scfg, fl, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &env{fleet: f, srv: srv, url: hs.URL, http: &http.Client{Transport: tr}}
}

// response is one answer of the surface.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) decode(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.body, v); err != nil {
		t.Fatalf("decoding %q: %v", r.body, err)
	}
}

// errorMessage returns the e2b error body, checking its shape.
func (r response) errorMessage(t testing.TB) string {
	t.Helper()
	var body struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	r.decode(t, &body)
	if body.Code != r.status || body.Message == "" {
		t.Errorf("error body %q does not match status %d", r.body, r.status)
	}
	return body.Message
}

func (e *env) do(t testing.TB, method, path, key string, body any) response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = bytes.NewReader([]byte(b))
	case []byte:
		rd = bytes.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if key != "" {
		req.Header.Set("X-API-KEY", key)
	}
	resp, err := e.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

// created is e2b's fleet.Sandbox answer.
type created struct {
	TemplateID      string  `json:"templateID"`
	SandboxID       string  `json:"sandboxID"`
	Alias           string  `json:"alias"`
	ClientID        string  `json:"clientID"`
	EnvdVersion     string  `json:"envdVersion"`
	EnvdAccessToken string  `json:"envdAccessToken"`
	Domain          string  `json:"domain"`
	Traffic         *string `json:"trafficAccessToken"`
}

type listed struct {
	TemplateID  string            `json:"templateID"`
	Alias       string            `json:"alias"`
	SandboxID   string            `json:"sandboxID"`
	ClientID    string            `json:"clientID"`
	StartedAt   time.Time         `json:"startedAt"`
	EndAt       time.Time         `json:"endAt"`
	CPUCount    int               `json:"cpuCount"`
	MemoryMB    int               `json:"memoryMB"`
	Metadata    map[string]string `json:"metadata"`
	State       string            `json:"state"`
	EnvdVersion string            `json:"envdVersion"`
	Domain      string            `json:"domain"`
}

// create makes a sandbox on the isolated lane (the simulator has no
// egress attachment) and checks the 201.
func (e *env) create(t testing.TB, key string, body map[string]any) created {
	t.Helper()
	if body == nil {
		body = map[string]any{}
	}
	if _, ok := body["templateID"]; !ok {
		body["templateID"] = "base"
	}
	if _, ok := body["allow_internet_access"]; !ok {
		body["allow_internet_access"] = false
	}
	r := e.do(t, http.MethodPost, "/v2/sandboxes", key, body)
	if r.status != http.StatusCreated {
		t.Fatalf("create = %d %s", r.status, r.body)
	}
	var c created
	r.decode(t, &c)
	return c
}

// claimToken reads a sandbox's own token from the fleet, as the test's
// independent check of the derived access token.
func (e *env) claimToken(t testing.TB, id string) (string, string) {
	t.Helper()
	for _, addr := range e.fleet.Addrs() {
		cl, err := sandboxd.New(addr, sandboxd.WithToken(rootToken))
		if err != nil {
			t.Fatal(err)
		}
		row, err := cl.Sandbox(context.Background(), id)
		if err == nil {
			return row.Token, addr
		}
	}
	t.Fatalf("sandbox %s is on no node", id)
	return "", ""
}

// live reports how many claims the fleet holds.
func (e *env) live(t testing.TB) int {
	t.Helper()
	total := 0
	for _, addr := range e.fleet.Addrs() {
		cl, err := sandboxd.New(addr, sandboxd.WithToken(rootToken))
		if err != nil {
			t.Fatal(err)
		}
		rows, err := cl.Sandboxes(context.Background(), "")
		if err != nil {
			t.Fatal(err)
		}
		total += len(rows)
	}
	return total
}

// envdGet reads path from the sandbox's envd guest through the relay, with
// the access token.
func (e *env) envdGet(t testing.TB, id, access, path string) response {
	t.Helper()
	token, addr := e.claimToken(t, id)
	cl, err := sandboxd.New(addr, sandboxd.WithToken(token))
	if err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return cl.DialPort(ctx, id, sandboxd.EnvdPort)
	}}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, "http://envd"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Access-Token", access)
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: raw}
}

func derived(token string) string { return envdtoken.Derive(envdSecret, token) }

// newFleet is the fleet core over a mesh view of the simulated nodes, as
// sandbox-e2b builds it.
func newFleet(t testing.TB, f *simfleet.Fleet) *fleet.Fleet {
	t.Helper()
	m, err := mesh.New(mesh.Config{Seeds: f.Addrs(), Token: rootToken})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	core, err := fleet.New(fleet.Config{View: m, Token: rootToken, FollowRedirects: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(core.Close)
	return core
}

func readAll(t testing.TB, resp *http.Response) []byte {
	t.Helper()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// putLink PUTs body to an upload link the surface handed out and returns
// the status.
func (e *env) putLink(t testing.TB, url, body string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.http.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
