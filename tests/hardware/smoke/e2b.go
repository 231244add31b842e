package smoke

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/mesh"
)

// E2BSurfaceAndProxy runs the e2b surface and the envd proxy in this
// process over the node (as sandbox-e2b does) and drives the envd of a
// sandbox through them: a create (which hands envd its access token
// through POST /init), envd's health and a ConnectRPC unary through the
// proxy with the derived token, a wrong token refused, and the kill. The
// node's Template must be an e2b-rt image (envd installed) with a warm pool
// on the none lane.
func E2BSurfaceAndProxy(t testing.TB, n Node) {
	tmpl := n.Template
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m, err := mesh.New(mesh.Config{Seeds: []string{n.Addr}, Token: n.Token, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Refresh(ctx); err != nil {
		t.Fatalf("mesh refresh: %v", err)
	}
	core, err := fleet.New(fleet.Config{View: m, Token: n.Token, FollowRedirects: true, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	version := n.EnvdVersion // what /etc/envd-version in the image says
	surface, err := e2b.NewServer(e2b.Config{
		Domain: "sandbox.smoke.test", EnvdSecret: secret, AllowAnonymous: true, EnvdVersion: version,
	}, core, logger)
	if err != nil {
		t.Fatal(err)
	}
	defer surface.Close()
	api := httptest.NewServer(surface)
	defer api.Close()
	proxy, err := envdproxy.New(envdproxy.Config{
		Locator: m.Locator(""), Domain: "sandbox.smoke.test", Secret: secret, Token: n.Token, Logger: logger,
	})
	if err != nil {
		t.Fatal(err)
	}
	data := httptest.NewServer(proxy)
	defer data.Close()

	body := `{"templateID":` + jsonString(tmpl) + `,"allow_internet_access":false,"timeout":120,"envVars":{"SMOKE":"1"}}`
	var created struct {
		SandboxID       string `json:"sandboxID"`
		EnvdAccessToken string `json:"envdAccessToken"`
	}
	if code := call(t, ctx, http.MethodPost, api.URL+"/v2/sandboxes", nil, body, &created); code != http.StatusCreated {
		t.Fatalf("create = %d", code)
	}
	defer func() {
		if code := call(t, context.Background(), http.MethodDelete, api.URL+"/sandboxes/"+created.SandboxID, nil, "", nil); code != http.StatusNoContent {
			t.Errorf("kill = %d", code)
		}
	}()

	envd := func(token string) http.Header {
		h := http.Header{"E2b-Sandbox-Id": {created.SandboxID}, "E2b-Sandbox-Port": {"49983"}}
		if token != "" {
			h.Set("X-Access-Token", token)
		}
		return h
	}
	if code := call(t, ctx, http.MethodGet, data.URL+"/health", envd(created.EnvdAccessToken), "", nil); code != http.StatusNoContent {
		t.Errorf("envd /health through the proxy = %d, want 204", code)
	}
	// A ConnectRPC unary (Connect protocol, JSON): stat the home directory.
	unary := envd(created.EnvdAccessToken)
	unary.Set("Content-Type", "application/json")
	unary.Set("Connect-Protocol-Version", "1")
	unary.Set("Authorization", "Basic dXNlcjo=") // user "user", as the SDK sends it
	var stat map[string]any
	if code := call(t, ctx, http.MethodPost, data.URL+"/filesystem.Filesystem/Stat", unary, `{"path":"/home/user"}`, &stat); code != http.StatusOK {
		t.Errorf("Filesystem/Stat through the proxy = %d, want 200", code)
	}
	wrong := envd(hex.EncodeToString(secret))
	wrong.Set("Content-Type", "application/json")
	wrong.Set("Connect-Protocol-Version", "1")
	if code := call(t, ctx, http.MethodPost, data.URL+"/filesystem.Filesystem/Stat", wrong, `{"path":"/home/user"}`, nil); code != http.StatusBadGateway {
		t.Errorf("a wrong access token = %d, want 502, the answer for an id that names nothing", code)
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// call sends one request and decodes a JSON answer into out when given.
func call(t testing.TB, ctx context.Context, method, url string, h http.Header, body string, out any) int {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range h {
		req.Header[k] = v
	}
	if body != "" && req.Header.Get("Content-Type") == "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if out != nil && resp.StatusCode/100 == 2 {
		if err := json.NewDecoder(bytes.NewReader(raw)).Decode(out); err != nil {
			t.Fatalf("%s %s: decoding %q: %v", method, url, raw, err)
		}
	}
	if resp.StatusCode/100 != 2 {
		t.Logf("%s %s = %d %s", method, url, resp.StatusCode, raw)
	}
	return resp.StatusCode
}
