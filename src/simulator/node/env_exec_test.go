package node_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestClaimEnvVerbs(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	api := "http://" + n.Addr()
	no := false
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Env: map[string]sandboxd.EnvEntry{
		"MODE": {Value: "prod"}, "GW_KEY": {Value: "Bearer secret", Guest: &no},
	}})
	if err != nil {
		t.Fatal(err)
	}
	env, err := root.Env(ctx, cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if env["MODE"].Value != "prod" || env["GW_KEY"].Value != "" || env["GW_KEY"].InGuest() {
		t.Fatalf("GET must blank host-only values: %+v", env)
	}

	// PATCH merges: null removes, the host-only value is kept as stored.
	if err := root.PatchEnv(ctx, cl.ID, map[string]*sandboxd.EnvEntry{"MODE": nil, "NEW": {Value: "x"}}); err != nil {
		t.Fatal(err)
	}
	env, _ = root.Env(ctx, cl.ID)
	if _, ok := env["MODE"]; ok || env["NEW"].Value != "x" || len(env) != 2 {
		t.Fatalf("after PATCH: %+v", env)
	}
	res, err := root.As(cl.Token).Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"sh", "-c", `printf '%s|%s' "$NEW" "${GW_KEY-unset}"`}})
	if err != nil {
		t.Fatal(err)
	}
	if res.Stdout != "x|unset" {
		t.Fatalf("exec saw %q: guest entries in, host-only ones out", res.Stdout)
	}

	// A guest change needs a running guest; a host-only one does not.
	if err := root.Hibernate(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	err = root.PatchEnv(ctx, cl.ID, map[string]*sandboxd.EnvEntry{"NEW": {Value: "y"}})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	if err := root.PatchEnv(ctx, cl.ID, map[string]*sandboxd.EnvEntry{"GW_KEY": {Value: "rotated", Guest: &no}}); err != nil {
		t.Fatalf("host-only change on a hibernated sandbox: %v", err)
	}
	if row, _ := root.Sandbox(ctx, cl.ID); !row.Hibernated {
		t.Fatal("an env verb must never wake the sandbox")
	}
	// PUT replaces; {} clears (the guest entry goes, so it needs a wake).
	if err := root.Wake(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	if err := root.SetEnv(ctx, cl.ID, nil); err != nil {
		t.Fatal(err)
	}
	if env, _ = root.Env(ctx, cl.ID); len(env) != 0 {
		t.Fatalf("after PUT {}: %+v", env)
	}

	// Another tenant's claim reads as unknown.
	_, err = client(t, n, tenantA).Env(ctx, cl.ID)
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)

	// Bad entries answer 400 on the claim and on the env verbs alike.
	for name, entry := range map[string]string{
		"guest null":     `{"A": {"value": "v", "guest": null}}`,
		"unknown member": `{"A": {"value": "v", "gest": false}}`,
		"not a name":     `{"1A": {"value": "v"}}`,
		"control char":   `{"A": {"value": "a\nb"}}`,
		"value too long": `{"A": {"value": "` + strings.Repeat("v", sandboxd.MaxEnvValueBytes+1) + `"}}`,
		"inject":         `{"A": {"value": "v", "guest": false, "inject": {"hosts": ["api.example.com"], "header": "Authorization"}}}`,
		"too many":       tooManyEnv(),
	} {
		code, body := rawDo(t, http.MethodPost, api+"/v1/claim", rootToken, []byte(`{"template":"`+tmpl+`","env":`+entry+`}`), nil)
		if code != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
			t.Errorf("claim with %s: %d %s", name, code, body)
		}
		code, body = rawDo(t, http.MethodPut, api+"/v1/sandboxes/"+cl.ID+"/env", rootToken, []byte(`{"env":`+entry+`}`), nil)
		if code != http.StatusBadRequest {
			t.Errorf("PUT with %s: %d %s", name, code, body)
		}
	}
	code, body := rawDo(t, http.MethodPost, api+"/v1/claim", rootToken, []byte(`{"template":"`+tmpl+`","env":{"A":{"value":"v","guest":false,"inject":{"hosts":["h"],"header":"X"}}}}`), nil)
	if code != http.StatusBadRequest || !strings.Contains(body, "inject host not intercepted") {
		t.Errorf("inject: %d %s", code, body)
	}
	code, body = rawDo(t, http.MethodPut, api+"/v1/sandboxes/"+cl.ID+"/env", rootToken, []byte(`{"env":{},"extra":1}`), nil)
	if code != http.StatusBadRequest {
		t.Errorf("unknown body field: %d %s", code, body)
	}
	if env, _ = root.Env(ctx, cl.ID); len(env) != 0 {
		t.Fatalf("refused writes changed the env: %+v", env)
	}
}

func tooManyEnv() string {
	parts := make([]string, sandboxd.MaxEnvEntries+1)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"V%d": {"value": "v"}`, i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func TestBufferedExec(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh on this host")
	}
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	own := root.As(cl.Token)
	dir, _ := n.ScratchDir(cl.ID)

	res, err := own.Exec(ctx, cl.ID, sandboxd.ExecRequest{
		Argv: []string{"sh", "-c", `mkdir -p work && echo "$CI" && echo oops >&2 && exit 3`}, Env: map[string]string{"CI": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || res.Stdout != "1\n" || res.Stderr != "oops\n" {
		t.Fatalf("exec answered %+v", res)
	}
	if !dirExists(filepath.Join(dir, "work")) {
		t.Fatal("the command did not run in the sandbox's scratch dir")
	}
	res, err = own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"pwd"}, Cwd: "/work"})
	if err != nil || strings.TrimSpace(res.Stdout) != filepath.Join(dir, "work") {
		t.Fatalf("cwd /work: %+v %v", res, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bin.dat"), []byte{0xff, 'a'}, 0o600); err != nil {
		t.Fatal(err)
	}
	if res, err = own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"cat", "bin.dat"}}); err != nil || res.Stdout != "\uFFFDa" {
		t.Fatalf("invalid UTF-8 output: %+v %v", res, err)
	}

	for name, req := range map[string]sandboxd.ExecRequest{
		"empty argv":       {},
		"negative timeout": {Argv: []string{"true"}, TimeoutSeconds: -1},
		"missing command":  {Argv: []string{"no-such-command-here"}},
		"bad cwd":          {Argv: []string{"true"}, Cwd: "/does/not/exist"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := own.Exec(ctx, cl.ID, req)
			wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
		})
	}
	code, body := rawDo(t, http.MethodPost, "http://"+n.Addr()+"/v1/sandboxes/"+cl.ID+"/exec", cl.Token, []byte(`{"argv":["true"],"stdin":"x"}`), nil)
	if code != http.StatusBadRequest {
		t.Fatalf("unknown field: %d %s", code, body)
	}
	// The sandbox's own token only.
	_, err = root.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"true"}})
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)

	// Past the output cap: 413, past the timeout: 504, the child killed.
	_, err = own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"sh", "-c", "while :; do echo xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; done"}})
	wantStatus(t, err, http.StatusRequestEntityTooLarge, sandboxd.ErrBadRequest)
	_, err = own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"sh", "-c", "echo $$ > pid; exec sleep 60"}, TimeoutSeconds: 1})
	if sandboxd.StatusOf(err) != http.StatusGatewayTimeout {
		t.Fatalf("timeout: %v", err)
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "pid"))
	pid := strings.TrimSpace(string(raw))
	poll.Until(t, "the command's process to end", func() bool { _, err := os.Stat("/proc/" + pid); return pid != "" && os.IsNotExist(err) })

	// A hibernated sandbox wakes transparently.
	if err := root.Hibernate(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"true"}}); err != nil {
		t.Fatal(err)
	}
	if row, _ := root.Sandbox(ctx, cl.ID); row.Hibernated {
		t.Fatal("exec must wake a hibernated sandbox")
	}
}
