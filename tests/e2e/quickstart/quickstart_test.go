// Package quickstart_test runs the README's quickstart the way a new user
// does: start the one-command local system (sandbox-e2b-local), take the
// `export` lines it prints, and run tools/quickstart/quickstart.mjs with the
// unmodified e2b SDK against it.
package quickstart_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	startTimeout = 2 * time.Minute
	runTimeout   = 3 * time.Minute
)

func TestQuickstartAgainstLocalSystem(t *testing.T) {
	project := nodejs.Setup(t, "tools/quickstart")
	project.Copy(t, "quickstart.mjs")
	binary := testbin.Path(t, "SANDBOX_E2B_LOCAL", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b-local")

	// Ephemeral ports: CI machines may already use the defaults.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, "--port=0", "--data-plane-port=0")
	cmd.SysProcAttr = testbin.ChildSysProcAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	logPath := filepath.Join(t.TempDir(), "sandbox-e2b-local.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	defer func() {
		cancel()
		if err := <-exited; err != nil && ctx.Err() == nil {
			t.Errorf("sandbox-e2b-local: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("sandbox-e2b-local log:\n%s", tail(string(b), 60))
		}
	}()

	exports := make(chan []string, 1)
	go func() {
		var env []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			t.Logf("sandbox-e2b-local: %s", line)
			if kv, ok := parseExport(line); ok {
				env = append(env, kv)
			}
			if strings.HasPrefix(line, "# ready") {
				exports <- env
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		exited <- cmd.Wait()
		close(exports)
	}()

	var env []string
	select {
	case e, ok := <-exports:
		if !ok {
			t.Fatal("sandbox-e2b-local exited before it was ready")
		}
		env = e
	case <-time.After(startTimeout):
		t.Fatalf("sandbox-e2b-local printed no ready line within %s", startTimeout)
	}
	for _, name := range []string{"E2B_API_URL", "E2B_DOMAIN", "E2B_SANDBOX_URL"} {
		if !hasVar(env, name) {
			t.Fatalf("sandbox-e2b-local did not export %s (got %q)", name, env)
		}
	}

	runCtx, runCancel := context.WithTimeout(context.Background(), runTimeout)
	defer runCancel()
	out := project.Run(t, runCtx, env, "quickstart.mjs")
	for _, want := range []string{"created sandbox sb-", "command said: hello from the sandbox",
		"inside the sandbox: cwd /home/user, user user, hostname sb-", "holds: written by the quickstart",
		"port 8000 served: hello from a web server in the sandbox", "killed sandbox sb-"} {
		if !strings.Contains(out, want) {
			t.Errorf("quickstart output lacks %q:\n%s", want, out)
		}
	}
}

// parseExport reads one `export NAME=VALUE` line as the shell would after
// eval: VALUE may be single-quoted.
func parseExport(line string) (string, bool) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(line), "export ")
	if !ok {
		return "", false
	}
	name, value, ok := strings.Cut(rest, "=")
	if !ok || name == "" {
		return "", false
	}
	if len(value) >= 2 && value[0] == '\'' && value[len(value)-1] == '\'' {
		value = strings.ReplaceAll(value[1:len(value)-1], `'\''`, `'`)
	}
	return fmt.Sprintf("%s=%s", name, value), true
}

func hasVar(env []string, name string) bool {
	for _, kv := range env {
		if strings.HasPrefix(kv, name+"=") {
			return true
		}
	}
	return false
}

func tail(s string, lines int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > lines {
		parts = parts[len(parts)-lines:]
	}
	return strings.Join(parts, "\n")
}
