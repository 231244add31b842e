// Package testbin locates the project's binaries for tests that run them as
// real processes.
//
// Under Bazel a test names the binary in its data and passes its runfiles
// location ($(rlocationpath ...)) in an environment variable (see
// tests/integration/simulator/BUILD.bazel); it is resolved against the
// runfiles tree Bazel names in RUNFILES_DIR or TEST_SRCDIR.
// Under plain `go test` the variable is unset and the binary is built from
// source: by Path into the test's temporary directory, by Locate into a
// per-user cache directory that later builds reuse.
package testbin

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
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
	if p, ok, err := fromEnv(env); ok || err != nil {
		if err != nil {
			t.Fatalf("testbin: %v", err)
		}
		return p
	}
	out := filepath.Join(t.TempDir(), filepath.Base(pkg))
	cmd := exec.Command(GoTool(), "build", "-o", out, pkg)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testbin: go build %s: %v\n%s", pkg, err, b)
	}
	return out
}

// Locate is Path for callers without a testing.TB (TestMain, benchmarks'
// setup, helper packages), and for large binaries: when env is unset it
// builds pkg with the given -ldflags into a per-user cache directory named
// after the package, the flags and the working directory's module, so the
// next build only relinks when something changed. Builds of the same
// binary by concurrent test processes are serialized with a lock file.
func Locate(env, pkg, ldflags string) (string, error) {
	if p, ok, err := fromEnv(env); ok || err != nil {
		return p, err
	}
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("testbin: %w", err)
	}
	sum := sha256.Sum256([]byte(pkg + "\x00" + ldflags + "\x00" + moduleRoot(wd)))
	dir := filepath.Join(base, "sandbox-operator-testbin", hex.EncodeToString(sum[:8]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("testbin: %w", err)
	}
	unlock, err := lockFile(filepath.Join(dir, ".lock"))
	if err != nil {
		return "", fmt.Errorf("testbin: %w", err)
	}
	defer unlock()

	out := filepath.Join(dir, filepath.Base(pkg))
	args := []string{"build", "-o", out}
	if ldflags != "" {
		args = append(args, "-ldflags="+ldflags)
	}
	cmd := exec.Command(GoTool(), append(args, pkg)...)
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("testbin: go build %s: %v\n%s", pkg, err, b)
	}
	return out, nil
}

// GoTool returns the go command that builds binaries under plain go test.
func GoTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

// fromEnv resolves the runfiles location in env (see Runfile); ok is false
// when env is unset.
func fromEnv(env string) (path string, ok bool, err error) {
	if os.Getenv(env) == "" {
		return "", false, nil
	}
	abs, err := Runfile(env)
	if err != nil {
		return "", true, err
	}
	if _, err := os.Stat(abs); err != nil {
		return "", true, fmt.Errorf("%s names a missing binary: %w", env, err)
	}
	return abs, true, nil
}

// moduleRoot returns the directory of the go.mod governing dir, so two
// checkouts never share (and overwrite) one cached binary.
func moduleRoot(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
		if filepath.Dir(d) == d {
			return dir
		}
	}
}
