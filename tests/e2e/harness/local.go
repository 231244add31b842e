package harness

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// localStartTimeout bounds sandbox-e2b-local's way to "# ready" (it waits
// for its warm pools, which are started machines).
const localStartTimeout = 2 * time.Minute

// StartLocal runs the README's main job, sandbox-e2b-local on ephemeral
// ports, as a new user does, and returns the environment its `export`
// lines set once it printed "# ready". It is stopped (SIGINT) when the test
// ends; its log is shown when the test failed.
func StartLocal(t *testing.T, binary string, args ...string) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	// Template builds keep their uploads under the user's cache by
	// default; a test keeps them in its own directory, unless it names one.
	defaults := []string{"--port=0", "--data-plane-port=0", "--metrics-port=0"}
	if !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--build-dir") }) {
		defaults = append(defaults, "--build-dir="+t.TempDir())
	}
	cmd := exec.CommandContext(ctx, binary, append(defaults, args...)...)
	cmd.SysProcAttr = testbin.ChildSysProcAttr()
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 20 * time.Second
	logPath := filepath.Join(t.TempDir(), "sandbox-e2b-local.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	cmd.Stderr = logFile
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	exports := make(chan []string, 1)
	go func() {
		var env []string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
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
	t.Cleanup(func() {
		cancel()
		if err := <-exited; err != nil && ctx.Err() == nil {
			t.Errorf("sandbox-e2b-local: %v", err)
		}
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("sandbox-e2b-local log:\n%s", lastLines(string(b), 60))
		}
	})
	select {
	case env, ok := <-exports:
		if !ok {
			t.Fatal("sandbox-e2b-local exited before it was ready")
		}
		return env
	case <-time.After(localStartTimeout):
		t.Fatalf("sandbox-e2b-local printed no ready line within %s", localStartTimeout)
		return nil
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

func lastLines(s string, n int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > n {
		parts = parts[len(parts)-n:]
	}
	return strings.Join(parts, "\n")
}
