package simfleet_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// The buffered exec of an isolated sandbox runs inside its machine, as the
// sandbox's user, with the claim's guest env; the program's control port
// refuses it to anything without the claim's token.
func TestIsolatedBufferedExecRunsInsideTheMachine(t *testing.T) {
	f, _ := startIsolatedFleet(t)
	ctx := ctxT(t)
	root := clientFor(t, f.Node(0), rootToken)
	no := false
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Env: map[string]sandboxd.EnvEntry{
		"MODE": {Value: "prod"}, "GW_KEY": {Value: "secret", Guest: &no},
	}})
	if err != nil {
		t.Fatal(err)
	}
	own := root.As(cl.Token)
	dns, _ := sandbox.DNSID(cl.ID)
	res, err := own.Exec(ctx, cl.ID, sandboxd.ExecRequest{
		Argv: []string{"sh", "-c", `pwd; id -un; hostname; echo "$MODE|${GW_KEY-unset}|$CI"`},
		Env:  map[string]string{"CI": "1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "/home/user\nuser\n" + dns + "\nprod|unset|1\n"; res.Stdout != want || res.ExitCode != 0 {
		t.Fatalf("exec inside answered %+v, want stdout %q", res, want)
	}
	res, err = own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"pwd"}, Cwd: "/tmp"})
	if err != nil || strings.TrimSpace(res.Stdout) != "/tmp" {
		t.Fatalf("cwd /tmp: %+v %v", res, err)
	}
	for _, req := range []sandboxd.ExecRequest{
		{Argv: []string{"no-such-command-here"}},
		{Argv: []string{"true"}, Cwd: "/does/not/exist"},
	} {
		_, err := own.Exec(ctx, cl.ID, req)
		if sandboxd.StatusOf(err) != http.StatusBadRequest {
			t.Errorf("%+v: %v, want 400", req, err)
		}
	}
	_, err = own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"sleep", "60"}, TimeoutSeconds: 1})
	if sandboxd.StatusOf(err) != http.StatusGatewayTimeout {
		t.Fatalf("timeout: %v, want 504", err)
	}
	// A process inside reaches the control port but not without the token.
	res, err = own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"sh", "-c",
		`curl -s -o /dev/null -w '%{http_code}' -X POST -d '{"argv":["id"]}' http://127.0.0.1:49982/exec`}})
	if err != nil || res.Stdout != "401" {
		t.Fatalf("tokenless exec from inside answered %+v %v, want 401", res, err)
	}
}
