// Package mesh_test runs sandbox-e2b-local as a user would — one command,
// nothing else installed — and drives the e2b API and data plane it
// prints with plain HTTP.
package mesh_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const localPkg = "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b-local"

// startLocal runs sandbox-e2b-local with args on ephemeral ports and
// returns the variables it exported once it printed "# ready".
func startLocal(t *testing.T, args ...string) map[string]string {
	t.Helper()
	bin := testbin.Path(t, "SANDBOX_E2B_LOCAL", localPkg)
	logPath := filepath.Join(t.TempDir(), "sandbox-e2b-local.log")
	p, err := testbin.StartProcess("sandbox-e2b-local", bin, logPath,
		append([]string{"--port", "0", "--data-plane-port", "0", "--metrics-port", "0"}, args...), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(30 * time.Second); err != nil {
			t.Errorf("%v\n%s", err, p.LogTail(40))
		}
		if t.Failed() {
			t.Log(p.LogTail(60))
		}
	})

	// The process writes "# ready" to its log file, which nothing
	// announces: poll the file, and stop at once if the process exits
	// first (cond runs on the test's goroutine, so it may fail the test).
	var out []byte
	poll.Until(t, "sandbox-e2b-local to print # ready", func() bool {
		out, _ = os.ReadFile(logPath)
		if bytes.Contains(out, []byte("\n# ready\n")) {
			return true
		}
		if err := p.ExitErr(); err != nil {
			t.Fatalf("%v before it was ready\n%s", err, p.LogTail(40))
		}
		return false
	})
	return parseExports(t, string(out))
}

// parseExports reads "export NAME=value" lines.
func parseExports(t *testing.T, out string) map[string]string {
	t.Helper()
	env := map[string]string{}
	for line := range strings.Lines(out) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "export "); ok {
			k, v, ok := strings.Cut(rest, "=")
			if !ok {
				t.Fatalf("malformed export line %q", line)
			}
			env[k] = v
		}
	}
	for _, k := range []string{"E2B_API_URL", "E2B_API_KEY", "E2B_DOMAIN", "E2B_SANDBOX_URL"} {
		if env[k] == "" {
			t.Fatalf("%s not exported; got %v", k, env)
		}
	}
	if _, ok := env["E2B_DEBUG"]; ok {
		t.Fatal("E2B_DEBUG exported: the SDK's debug mode skips the API")
	}
	return env
}

func do(t *testing.T, req *http.Request) (int, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, body
}

func newRequest(t *testing.T, method, url string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return req
}

func TestLocalSystemServesCreateAndDataPlane(t *testing.T) {
	env := startLocal(t, "--anonymous=false")
	if !strings.HasPrefix(env["E2B_API_URL"], "http://127.0.0.1:") || !strings.HasPrefix(env["E2B_SANDBOX_URL"], "http://127.0.0.1:") {
		t.Fatalf("not loopback URLs: %v", env)
	}

	if code, _ := do(t, newRequest(t, http.MethodGet, env["E2B_API_URL"]+"/health", nil)); code != http.StatusOK {
		t.Fatalf("GET /health: %d", code)
	}

	// Without the key the API refuses.
	create := newRequest(t, http.MethodPost, env["E2B_API_URL"]+"/sandboxes", []byte(`{"templateID":"base"}`))
	create.Header.Set("Content-Type", "application/json")
	if code, _ := do(t, create); code != http.StatusUnauthorized {
		t.Fatalf("create without X-API-KEY: %d, want 401", code)
	}

	// The SDK's default create: template alias "base", internet access.
	var ids []string
	var tokens []string
	for range 4 {
		create = newRequest(t, http.MethodPost, env["E2B_API_URL"]+"/sandboxes", []byte(`{"templateID":"base","timeout":120}`))
		create.Header.Set("Content-Type", "application/json")
		create.Header.Set("X-API-KEY", env["E2B_API_KEY"])
		code, body := do(t, create)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %s", code, body)
		}
		var sb struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
			Domain          string `json:"domain"`
		}
		if err := json.Unmarshal(body, &sb); err != nil {
			t.Fatalf("create answer %s: %v", body, err)
		}
		if sb.SandboxID == "" || sb.EnvdAccessToken == "" || sb.Domain != env["E2B_DOMAIN"] {
			t.Fatalf("create answered %s", body)
		}
		ids = append(ids, sb.SandboxID)
		tokens = append(tokens, sb.EnvdAccessToken)
	}

	// Each sandbox's envd answers through the data plane, placed by the
	// headers the SDK sends when E2B_SANDBOX_URL is set.
	for i, id := range ids {
		health := newRequest(t, http.MethodGet, env["E2B_SANDBOX_URL"]+"/health", nil)
		health.Header.Set("E2b-Sandbox-Id", id)
		health.Header.Set("E2b-Sandbox-Port", "49983")
		health.Header.Set("X-Access-Token", tokens[i])
		if code, body := do(t, health); code != http.StatusNoContent && code != http.StatusOK {
			t.Fatalf("envd /health of %s through the data plane: %d %s", id, code, body)
		}
		// Another sandbox's token does not open it.
		wrong := newRequest(t, http.MethodGet, env["E2B_SANDBOX_URL"]+"/health", nil)
		wrong.Header.Set("E2b-Sandbox-Id", id)
		wrong.Header.Set("E2b-Sandbox-Port", "49983")
		wrong.Header.Set("X-Access-Token", tokens[(i+1)%len(tokens)])
		if code, _ := do(t, wrong); code < 400 {
			t.Fatalf("envd of %s opened with another sandbox's token: %d", id, code)
		}
	}

	// The list gathers every node's sandboxes.
	list := newRequest(t, http.MethodGet, env["E2B_API_URL"]+"/v2/sandboxes", nil)
	list.Header.Set("X-API-KEY", env["E2B_API_KEY"])
	code, body := do(t, list)
	if code != http.StatusOK {
		t.Fatalf("list: %d %s", code, body)
	}
	for _, id := range ids {
		if !bytes.Contains(body, []byte(`"`+id+`"`)) {
			t.Errorf("list does not show %s: %s", id, body)
		}
	}
}

func TestLocalSystemRefusesAnonymousBeyondLoopback(t *testing.T) {
	bin := testbin.Path(t, "SANDBOX_E2B_LOCAL", localPkg)
	cmd := exec.Command(bin, "--anonymous", "--host", "0.0.0.0", "--port", "0", "--data-plane-port", "0", "--metrics-port", "0")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(string(out), "--anonymous") {
		t.Fatalf("anonymous on 0.0.0.0: %v\n%s", err, out)
	}
}
