package envd

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
)

func TestInitMergesEnvVars(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.Envs = map[string]string{"KEEP": "config", "OVERRIDE": "config"} })
	post := func(token, body string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, f.srv.URL+"/init", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := f.client(false, token).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	if code := post("", `{"envVars":{"X":"1"}}`); code != http.StatusUnauthorized {
		t.Errorf("init without the access token = %d, want 401", code)
	}
	if code := post("wrong", `{"envVars":{"X":"1"}}`); code != http.StatusUnauthorized {
		t.Errorf("init with a wrong token = %d, want 401", code)
	}
	if code := post(testToken, `{"envVars":`); code != http.StatusBadRequest {
		t.Errorf("init with bad JSON = %d, want 400", code)
	}
	if code := post(testToken, `{"envVars":{"A=B":"1"}}`); code != http.StatusBadRequest {
		t.Errorf("init with a bad name = %d, want 400", code)
	}
	// Other /init fields are accepted and change nothing.
	body := `{"envVars":{"OVERRIDE":"init","NEW":"v 1"},"defaultUser":"user","timestamp":"2026-01-01T00:00:00Z"}`
	if code := post(testToken, body); code != http.StatusNoContent {
		t.Fatalf("init = %d, want 204", code)
	}

	// GET /envs reports the merge.
	resp, err := f.client(false, testToken).Get(f.srv.URL + "/envs")
	if err != nil {
		t.Fatal(err)
	}
	var envs map[string]string
	if err := json.NewDecoder(resp.Body).Decode(&envs); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	want := map[string]string{"KEEP": "config", "OVERRIDE": "init", "NEW": "v 1"}
	for k, v := range want {
		if envs[k] != v {
			t.Errorf("GET /envs %s = %q, want %q (all: %v)", k, envs[k], v, envs)
		}
	}

	// And a process started afterwards sees it; a request env still wins.
	cfg := bashCommand(`printf '%s|%s|%s' "$KEEP" "$OVERRIDE" "$NEW"`)
	o := run(t, f.process(wires[0]), &processpb.StartRequest{Process: cfg})
	if got := o.stdout.String(); got != "config|init|v 1" {
		t.Errorf("process env = %q, want %q", got, "config|init|v 1")
	}
	cfg = bashCommand(`printf '%s' "$NEW"`)
	cfg.Envs = map[string]string{"NEW": "request"}
	o = run(t, f.process(wires[0]), &processpb.StartRequest{Process: cfg})
	if got := o.stdout.String(); got != "request" {
		t.Errorf("request env = %q, want it to win over /init", got)
	}
}

// TestInitSetsAccessToken: like envd, a guest started without a token
// takes the one POST /init hands it, and from then on refuses requests
// (including another /init) without it; the token in force guards /init.
func TestInitSetsAccessToken(t *testing.T) {
	f := newFixture(t, func(c *Config) { c.AccessToken = "" })
	do := func(method, path, token, body string) int {
		t.Helper()
		req, err := http.NewRequestWithContext(testContext(t), method, f.srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := f.client(false, token).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if code := do(http.MethodGet, "/envs", "", ""); code != http.StatusOK {
		t.Fatalf("GET /envs on a tokenless guest = %d, want 200", code)
	}
	if code := do(http.MethodPost, "/init", "", `{"accessToken":"t-1"}`); code != http.StatusNoContent {
		t.Fatalf("init setting a token = %d, want 204", code)
	}
	if code := do(http.MethodGet, "/envs", "", ""); code != http.StatusUnauthorized {
		t.Errorf("GET /envs without the token /init set = %d, want 401", code)
	}
	if code := do(http.MethodGet, "/envs", "t-1", ""); code != http.StatusOK {
		t.Errorf("GET /envs with the token /init set = %d, want 200", code)
	}
	if code := do(http.MethodPost, "/init", "", `{"accessToken":"mine"}`); code != http.StatusUnauthorized {
		t.Errorf("a second init without the token in force = %d, want 401", code)
	}
	if code := do(http.MethodPost, "/init", "t-1", `{"accessToken":"t-2"}`); code != http.StatusNoContent {
		t.Fatalf("init by the token holder = %d, want 204", code)
	}
	if code := do(http.MethodGet, "/envs", "t-1", ""); code != http.StatusUnauthorized {
		t.Errorf("the replaced token still works: %d", code)
	}
}
