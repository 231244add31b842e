// Package testbin locates the project's binaries for tests that run them as
// real processes.
//
// Under Bazel a test names the binary in its data and passes its runfiles
// location ($(rlocationpath ...)) in an environment variable (see
// tests/integration/simulator/BUILD.bazel); it is resolved against the
// runfiles tree Bazel names in RUNFILES_DIR or TEST_SRCDIR.
// Under plain `go test` the variable is unset and the binary is built from
// source into the test's temporary directory.
package testbin

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// Path returns an executable for the Go main package pkg (an import path
// inside this module, e.g. ".../src/cmd/sandboxd-sim"), taking it from the
// environment variable env when that is set.
func Path(t testing.TB, env, pkg string) string {
	t.Helper()
	if p := os.Getenv(env); p != "" {
		abs := p
		if !filepath.IsAbs(p) {
			root := os.Getenv("RUNFILES_DIR")
			if root == "" {
				root = os.Getenv("TEST_SRCDIR")
			}
			if root == "" {
				t.Fatalf("testbin: %s=%q is a runfiles location but neither RUNFILES_DIR nor TEST_SRCDIR is set", env, p)
			}
			abs = filepath.Join(root, p)
		}
		if _, err := os.Stat(abs); err != nil {
			t.Fatalf("testbin: %s names a missing binary: %v", env, err)
		}
		return abs
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command(goBin, "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbin: go build %s: %v\n%s", pkg, err, b)
	}
	return out
}
