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
	project.Copy(t, "lib.mjs", "isolation.test.mjs", "limits.test.mjs")
	binary := testbin.Path(t, "SANDBOX_E2B_LOCAL", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b-local")
	// Two catalog volumes: one read-only dataset with a file in it, one
	// writable scratch the suite writes to, read back here.
	datasets, scratch := t.TempDir(), t.TempDir()
	volumeText := "from-the-catalog-" + harness.RandomHex(t)
	hello := harness.WriteFile(t, datasets, "hello.txt", volumeText+"\n")
	// The sandbox user is not this test's user: the dataset must be
	// readable and the scratch writable by anyone, as a shared disk's
	// files would be.
	for p, mode := range map[string]os.FileMode{datasets: 0o755, hello: 0o644, scratch: 0o777} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	env := harness.StartLocal(t, binary, "--volume=datasets="+datasets, "--volume=scratch="+scratch+",writable")

	// A file of the host that must stay out of reach: this test's binary.
	hostFile, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	marker := "isolation-" + harness.RandomHex(t)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	project.Run(t, ctx, append(env, "E2E_MARKER="+marker, "E2E_HOST_FILE="+hostFile, "E2E_VOLUME_TEXT="+volumeText),
		"--test", "--test-reporter=spec", "--test-concurrency=1", "isolation.test.mjs", "limits.test.mjs")

	// What a sandbox wrote to the writable volume is on its host
	// directory.
	if got, err := os.ReadFile(filepath.Join(scratch, "from-sandbox.txt")); err != nil || strings.TrimSpace(string(got)) != marker {
		t.Errorf("the sandbox's write to the writable volume: %q, %v; want %q on the host directory", got, err, marker)
	}
	// What the sandboxes wrote is not on the host outside their own
	// directories (and the volume they were given).
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
