// Package isolation_test runs the isolation suite (tests/e2e/js/
// isolation.test.mjs) with the unmodified e2b SDK against the README's main
// job, sandbox-e2b-local, and then checks the host side.
package isolation_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

func TestIsolationThroughTheSDK(t *testing.T) {
	project := nodejs.Setup(t, "tests/e2e/js")
	project.Copy(t, "lib.mjs", "isolation.test.mjs")
	binary := testbin.Path(t, "SANDBOX_E2B_LOCAL", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b-local")
	env := harness.StartLocal(t, binary)

	// A file of the host that must stay out of reach: this test's binary.
	hostFile, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := "isolation-" + harness.RandomHex(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	project.Run(t, ctx, append(env, "E2E_MARKER="+marker, "E2E_HOST_FILE="+hostFile),
		"--test", "--test-reporter=spec", "--test-concurrency=1", "isolation.test.mjs")

	// What the sandboxes wrote is not on the host outside their own
	// directories.
	for _, p := range []string{filepath.Join("/tmp", marker), filepath.Join("/home/user", marker), filepath.Join(os.TempDir(), marker)} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("%s, written inside a sandbox, exists on the host", p)
		}
	}
	// Kill left no process of the sandboxes behind: every command the
	// suite started named the marker.
	if procs := processesNaming(marker); len(procs) > 0 {
		t.Errorf("processes of killed sandboxes still run: %v", procs)
	}
}

func processesNaming(s string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmd), s) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}
