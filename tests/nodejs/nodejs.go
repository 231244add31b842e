// Package nodejs runs JavaScript programs and test suites (the unmodified
// e2b SDK against this project's servers) from Go tests.
//
// Under Bazel, node and the npm packages come from the build itself: the
// test names @nodejs//:node and @<project>_npm//:node_modules.tar in its
// data and passes their runfiles locations in NODE and NODE_MODULES_TAR
// (see tools/build/nodejs.bzl, which installs them from the checked-in
// lockfile). Under plain `go test` the host's node is used and the project's
// lockfile is installed with the host's `npm ci` into a per-user cache; a
// machine without node skips the test with a message saying how to run it.
package nodejs

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Environment variables a Bazel test sets to runfiles locations.
const (
	NodeEnv        = "NODE"
	NodeModulesEnv = "NODE_MODULES_TAR"
)

// minNode is the oldest node the e2b SDK supports (its engines field).
var minNode = [3]int{20, 18, 1}

// Project is a working directory holding an npm project's installed
// packages, into which scripts are copied and run.
type Project struct {
	// Node is the node executable.
	Node string
	// Dir is the working directory: node_modules is in it, so a script
	// copied here resolves its imports.
	Dir string
	// Src is the project's source directory (package.json, scripts).
	Src string
}

// Setup prepares the npm project at project (a path relative to the
// repository root, e.g. "tests/e2e/js") in a fresh temporary directory.
func Setup(t testing.TB, project string) *Project {
	t.Helper()
	src, err := sourceDir(project)
	if err != nil {
		t.Fatalf("nodejs: %v", err)
	}
	dir := t.TempDir()
	p := &Project{Dir: dir, Src: src}
	if node, ok, err := runfile(NodeEnv); ok {
		if err != nil {
			t.Fatalf("nodejs: %v", err)
		}
		tarPath, ok, err := runfile(NodeModulesEnv)
		if !ok || err != nil {
			t.Fatalf("nodejs: %s is set but %s is not usable: %v", NodeEnv, NodeModulesEnv, err)
		}
		if err := untar(tarPath, dir); err != nil {
			t.Fatalf("nodejs: unpacking %s: %v", tarPath, err)
		}
		p.Node = node
		return p
	}
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("nodejs: no node on PATH; run this test with `tools/bazel test`, which provides node and the npm packages")
	}
	if err := checkVersion(node); err != nil {
		t.Skipf("nodejs: %v; run this test with `tools/bazel test`", err)
	}
	modules, err := hostInstall(src)
	if err != nil {
		t.Fatalf("nodejs: %v", err)
	}
	if err := os.Symlink(modules, filepath.Join(dir, "node_modules")); err != nil {
		t.Fatalf("nodejs: %v", err)
	}
	p.Node = node
	return p
}

// Copy copies the named files of the project's source directory into Dir.
func (p *Project) Copy(t testing.TB, names ...string) {
	t.Helper()
	for _, name := range names {
		b, err := os.ReadFile(filepath.Join(p.Src, name))
		if err != nil {
			t.Fatalf("nodejs: %v", err)
		}
		if err := os.WriteFile(filepath.Join(p.Dir, filepath.Base(name)), b, 0o644); err != nil {
			t.Fatalf("nodejs: %v", err)
		}
	}
}

// Command returns node with args, run in Dir with env added to a minimal
// environment (PATH and HOME only, so nothing of the caller's e2b
// configuration leaks in).
func (p *Project) Command(ctx context.Context, env []string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, p.Node, args...)
	cmd.Dir = p.Dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + p.Dir,
		"NO_COLOR=1",
	}, env...)
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// Run runs node with args and env, logging its output through t, and fails
// the test when it exits non-zero. It returns the combined output.
func (p *Project) Run(t testing.TB, ctx context.Context, env []string, args ...string) string {
	t.Helper()
	var out bytes.Buffer
	cmd := p.Command(ctx, env, args...)
	w := io.MultiWriter(&out, logWriter{t})
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		t.Fatalf("node %v: %v", args, err)
	}
	return out.String()
}

// logWriter forwards a child's output to the test log as it arrives.
type logWriter struct{ t testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(b, "\n")))
	return len(b), nil
}

// runfile resolves the runfiles location held in env; ok is false when env
// is unset.
func runfile(env string) (path string, ok bool, err error) {
	loc := os.Getenv(env)
	if loc == "" {
		return "", false, nil
	}
	if filepath.IsAbs(loc) {
		return loc, true, nil
	}
	root := os.Getenv("RUNFILES_DIR")
	if root == "" {
		root = os.Getenv("TEST_SRCDIR")
	}
	if root == "" {
		return "", true, fmt.Errorf("%s=%q is a runfiles location but neither RUNFILES_DIR nor TEST_SRCDIR is set", env, loc)
	}
	path = filepath.Join(root, loc)
	if _, err := os.Stat(path); err != nil {
		return "", true, fmt.Errorf("%s: %w", env, err)
	}
	return path, true, nil
}

// sourceDir finds the project's sources: in the runfiles tree under Bazel,
// else in the module the test runs in.
func sourceDir(project string) (string, error) {
	for _, env := range []string{"RUNFILES_DIR", "TEST_SRCDIR"} {
		if root := os.Getenv(env); root != "" {
			dir := filepath.Join(root, "_main", project)
			if _, err := os.Stat(dir); err == nil {
				return dir, nil
			}
		}
	}
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; ; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return filepath.Join(d, project), nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod above %s", wd)
		}
	}
}

var versionRE = regexp.MustCompile(`^v(\d+)\.(\d+)\.(\d+)`)

func checkVersion(node string) error {
	out, err := exec.Command(node, "--version").Output()
	if err != nil {
		return fmt.Errorf("%s --version: %w", node, err)
	}
	m := versionRE.FindStringSubmatch(string(out))
	if m == nil {
		return fmt.Errorf("%s --version printed %q", node, out)
	}
	var v [3]int
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	for i := range v {
		if v[i] != minNode[i] {
			if v[i] < minNode[i] {
				return fmt.Errorf("node %s is older than the e2b SDK's minimum %d.%d.%d", bytes.TrimSpace(out), minNode[0], minNode[1], minNode[2])
			}
			break
		}
	}
	return nil
}

var installMu sync.Mutex

// hostInstall installs the project's lockfile with the host's npm into a
// cache directory named after the lockfile's hash, once, and returns its
// node_modules.
func hostInstall(src string) (string, error) {
	installMu.Lock()
	defer installMu.Unlock()
	lock, err := os.ReadFile(filepath.Join(src, "package-lock.json"))
	if err != nil {
		return "", err
	}
	pkg, err := os.ReadFile(filepath.Join(src, "package.json"))
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(append(append([]byte{}, pkg...), lock...))
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, "sandbox-operator-testbin", "npm", hex.EncodeToString(sum[:8]))
	modules := filepath.Join(dir, "node_modules")
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err == nil {
		return modules, nil
	}
	npm, err := exec.LookPath("npm")
	if err != nil {
		return "", fmt.Errorf("node is installed but npm is not: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for name, b := range map[string][]byte{"package.json": pkg, "package-lock.json": lock} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return "", err
		}
	}
	cmd := exec.Command(npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("npm ci in %s: %w\n%s", dir, err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, ".complete"), nil, 0o644); err != nil {
		return "", err
	}
	return modules, nil
}
