package machine_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/echo"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/envd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/machine"
)

const (
	echoPort    = 8080
	tcpEchoPort = 9090
	claimToken  = "claim-token-for-the-test"
)

var secret = []byte("envd-secret-for-the-test")

// TestClaimedSandbox drives a claimed sandbox the way the e2b SDK would,
// through envd's API over the relay, and checks it is an isolated Debian
// system of its own.
func TestClaimedSandbox(t *testing.T) {
	requireRoot(t)
	mountsBefore := mountCount(t)
	sb := startSandbox(t, machine.Config{
		Envd:         true,
		EnvdSecret:   secret,
		Envs:         map[string]string{"FROM_CONFIG": "yes"},
		EchoPorts:    []int{echoPort},
		TCPEchoPorts: []int{tcpEchoPort},
	})
	if err := machine.Deliver(testContext(t), sb.Dial, machine.Claim{ID: "sb-claimed", Token: claimToken}); err != nil {
		t.Fatal(err)
	}
	token := envd.DeriveAccessToken(secret, claimToken)
	proc := processClient(t, sb, token)

	t.Run("commands see the sandbox", func(t *testing.T) {
		out := mustRun(t, proc, `pwd; id -un; hostname; echo "$HOME|$FROM_CONFIG"; ls /`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) < 5 || lines[0] != "/home/user" || lines[1] != "user" || lines[2] != "sb-test" || lines[3] != "/home/user|yes" {
			t.Fatalf("pwd, id -un, hostname, env printed %q", out)
		}
		root := lines[4:]
		for _, want := range []string{"bin", "etc", "home", "usr", "tmp"} {
			if !slices.Contains(root, want) {
				t.Errorf("ls / = %v, missing %s", root, want)
			}
		}
		// The host's directories (this test's own, for one) are not in
		// view; the sandbox's root has its own /root, /tmp and so on.
		wd, _ := os.Getwd()
		if r := runCommand(t, proc, "test -e "+wd); r.exit == 0 {
			t.Errorf("the host's %s exists inside", wd)
		}
		if r := runCommand(t, proc, "cat "+filepath.Join(wd, "machine_test.go")); r.exit == 0 {
			t.Errorf("a host path (%s) is readable inside", wd)
		}
		if got := mustRun(t, proc, "cat /etc/sandbox-operator/rootfs"); !strings.Contains(got, "template=base") {
			t.Errorf("the base template's marker reads %q", got)
		}
	})

	t.Run("a terminal runs as the user", func(t *testing.T) {
		st, err := proc.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{
			Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-c", "id -un; tty"}},
			Pty:     &processpb.PTY{Size: &processpb.PTY_Size{Cols: 80, Rows: 24}},
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		var out strings.Builder
		for st.Receive() {
			out.Write(st.Msg().GetEvent().GetData().GetPty())
		}
		if got := out.String(); !strings.HasPrefix(got, "user\r\n/dev/pts/") {
			t.Errorf("a pty command printed %q (%v)", got, st.Err())
		}
	})

	t.Run("files land in the sandbox's layer", func(t *testing.T) {
		files := client(t, sb, machine.EnvdPort, token)
		req, err := http.NewRequestWithContext(testContext(t), http.MethodPost, envdURL+"/files?path=notes/hello.txt", strings.NewReader("hello from the files API\n"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/octet-stream")
		resp, err := files.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), `"/home/user/notes/hello.txt"`) {
			t.Fatalf("upload: %s %s", resp.Status, body)
		}
		onHost := filepath.Join(sb.LayerDir(), "home", "user", "notes", "hello.txt")
		b, err := os.ReadFile(onHost)
		if err != nil || string(b) != "hello from the files API\n" {
			t.Fatalf("%s holds %q, %v", onHost, b, err)
		}
		if st, err := os.Stat(onHost); err != nil || st.Sys().(*syscall.Stat_t).Uid != 1000 {
			t.Errorf("the uploaded file is not user's (uid 1000): %v", err)
		}
		// The user's commands own it: they can change it.
		if got := mustRun(t, proc, "echo more >> notes/hello.txt && cat ~/notes/hello.txt"); got != "hello from the files API\nmore\n" {
			t.Errorf("the user's command read %q", got)
		}

		// An absolute path outside the home is the sandbox's own file.
		resp, err = files.Get(envdURL + "/files?path=/etc/sandbox-operator/rootfs")
		if err != nil {
			t.Fatal(err)
		}
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "template=base") {
			t.Errorf("download of /etc/sandbox-operator/rootfs: %s %q", resp.Status, body)
		}
	})

	t.Run("a port a command opens is reachable", func(t *testing.T) {
		mustRun(t, proc, `mkdir -p ~/site && echo "served from the sandbox" > ~/site/index.html && cd ~/site && (python3 -m http.server 8000 >/tmp/http.log 2>&1 &)`)
		status, body := get(t, sb, 8000, "/index.html")
		if status != http.StatusOK || body != "served from the sandbox\n" {
			t.Fatalf("GET :8000/index.html = %d %q", status, body)
		}
		// It runs as the user, like the command that started it.
		if got := mustRun(t, proc, "ps -o user= -C python3"); strings.TrimSpace(got) != "user" {
			t.Errorf("the web server runs as %q", got)
		}
	})

	t.Run("echo guests answer", func(t *testing.T) {
		status, body := get(t, sb, echoPort, "/hello?x=1")
		var doc echo.Request
		if err := json.Unmarshal([]byte(body), &doc); status != http.StatusOK || err != nil {
			t.Fatalf("HTTP echo: %d %q %v", status, body, err)
		}
		if doc.Sandbox != "sb-claimed" || doc.Port != echoPort || doc.Path != "/hello" {
			t.Errorf("HTTP echo answered %+v", doc)
		}
		c, err := sb.Dial(testContext(t), tcpEchoPort)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := io.WriteString(c, "ping"); err != nil {
			t.Fatal(err)
		}
		if err := c.(interface{ CloseWrite() error }).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		if got, err := io.ReadAll(c); err != nil || string(got) != "ping" {
			t.Errorf("TCP echo: %q %v", got, err)
		}
	})

	t.Run("the access token is required", func(t *testing.T) {
		for _, tok := range []string{"", "wrong", envd.DeriveAccessToken(secret, "another-claim")} {
			_, err := processClient(t, sb, tok).List(testContext(t), connect.NewRequest(&processpb.ListRequest{}))
			if connect.CodeOf(err) != connect.CodeUnauthenticated {
				t.Errorf("List with token %q: %v, want unauthenticated", tok, err)
			}
			resp, err := client(t, sb, machine.EnvdPort, tok).Get(envdURL + "/files?path=notes/hello.txt")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("download with token %q: %s", tok, resp.Status)
			}
		}
	})

	t.Run("a second claim is refused", func(t *testing.T) {
		err := machine.Deliver(testContext(t), sb.Dial, machine.Claim{ID: "sb-other", Token: "other"})
		if !errors.Is(err, machine.ErrAlreadyClaimed) {
			t.Fatalf("second claim: %v, want ErrAlreadyClaimed", err)
		}
		// The first claim's token still holds.
		mustRun(t, proc, "true")
	})

	t.Run("close leaves nothing behind", func(t *testing.T) {
		pids := sandboxProcesses(t, sb)
		if len(pids) < 3 { // init, program, the web server
			t.Fatalf("sandbox processes: %v", pids)
		}
		dir := sb.Dir()
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
		for _, pid := range pids {
			if !gone(pid) {
				t.Errorf("process %d outlived the sandbox", pid)
			}
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("sandbox directory %s left: %v", dir, err)
		}
		if n := mountCount(t); n != mountsBefore {
			t.Errorf("host mounts: %d before, %d after", mountsBefore, n)
		}
	})
}

// TestGuestsStartAtTheClaim: a warm sandbox serves only the control port;
// envd comes up with the claim, open when no secret is set, and the
// program ends (closing its guests) when the sandbox is stopped.
func TestGuestsStartAtTheClaim(t *testing.T) {
	requireRoot(t)
	sb := startSandbox(t, machine.Config{Envd: true, EchoPorts: []int{echoPort}})
	ctx := testContext(t)
	if c, err := sb.Dial(ctx, machine.EnvdPort); err == nil {
		c.Close()
		t.Fatal("envd listens before the claim")
	}
	if err := machine.Deliver(ctx, sb.Dial, machine.Claim{ID: "sb-open"}); err != nil {
		t.Fatal(err)
	}
	// Deliver returned, so envd listens now: no retry needed.
	c, err := sb.Dial(ctx, machine.EnvdPort)
	if err != nil {
		t.Fatalf("envd not listening right after the claim: %v", err)
	}
	c.Close()
	if got := mustRun(t, processClient(t, sb, ""), "id -u; whoami"); got != "1000\nuser\n" {
		t.Errorf("without a secret, commands run and print %q", got)
	}
	// The program (PID 2 inside) ends on SIGTERM, and the sandbox with it;
	// the init ignores SIGTERM.
	if err := syscall.Kill(programPID(t, sb), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-sb.Done():
	case <-ctx.Done():
		t.Fatal("the sandbox did not end on SIGTERM")
	}
}

// TestBadConfigEndsTheSandbox: colliding ports fail the program at
// preparation, before any claim.
func TestBadConfigEndsTheSandbox(t *testing.T) {
	requireRoot(t)
	sb := startSandbox(t, machine.Config{Envd: true, EchoPorts: []int{machine.EnvdPort}})
	select {
	case <-sb.Done():
	case <-testContext(t).Done():
		t.Fatal("a sandbox with colliding ports kept running")
	}
	// An ended sandbox's relay refuses like a program not yet listening,
	// so only the context bounds Deliver here.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := machine.Deliver(ctx, sb.Dial, machine.Claim{ID: "x"}); err == nil {
		t.Error("a claim reached a failed program")
	}
}
