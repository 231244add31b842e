// Package codeinterp_test runs the code-interpreter suite (tests/e2e/js/
// codeinterp.test.mjs) with the unmodified npm @e2b/code-interpreter
// against the README's main job, sandbox-e2b-local, whose
// code-interpreter-v1 alias is a pool of isolated e2b-ci sandboxes.
package codeinterp_test

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

func TestCodeInterpreterThroughTheSDK(t *testing.T) {
	project := nodejs.Setup(t, "tests/e2e/js")
	project.Copy(t, "lib.mjs", "codeinterp.test.mjs")
	binary := testbin.Path(t, "SANDBOX_E2B_LOCAL", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b-local")
	// Registered first, so it runs after sandbox-e2b-local has stopped:
	// no kernel of its sandboxes (warm, killed mid-cell or released) is
	// left on the host. Its machines' cgroups are named after its pid;
	// other tests' kernels may run at the same time.
	var cgroup string
	t.Cleanup(func() {
		if left := kernelProcesses(cgroup); cgroup != "" && len(left) > 0 {
			t.Errorf("kernel processes outlived the local system: %v", left)
		}
	})
	// Fewer nodes than the default: each warm code-interpreter sandbox
	// holds a kernel.
	env := harness.StartLocal(t, binary, "--nodes=2", "--cold-nodes=0", "--warm=1", "--code-interpreter-warm=2")
	pid := childNamed("sandbox-e2b-loc") // comm is cut at 15 bytes
	if pid == 0 {
		t.Fatal("sandbox-e2b-local is not a child of this test")
	}
	cgroup = "/sandbox-operator-e2b-local-" + strconv.Itoa(pid) + "/"
	if len(kernelProcesses(cgroup)) == 0 {
		t.Fatalf("no kernel runs in %s: the check below would prove nothing", cgroup)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	project.Run(t, ctx, env, "--test", "--test-reporter=spec", "--test-concurrency=1", "codeinterp.test.mjs")
}

// kernelProcesses lists the IPython kernel processes in cgroup (a path
// part of /proc/<pid>/cgroup).
func kernelProcesses(cgroup string) []string {
	ents, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmd), "ipykernel") {
			continue
		}
		if cg, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cgroup")); err == nil && strings.Contains(string(cg), cgroup) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmd), "\x00", " "))
		}
	}
	return out
}

// childNamed is the pid of this process's child whose comm is name, or 0.
func childNamed(name string) int {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// "pid (comm) state ppid ...": comm may hold spaces, so split at
		// its closing parenthesis.
		open, closing := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		if open < 0 || closing < open {
			continue
		}
		fields := strings.Fields(string(stat[closing+1:]))
		if len(fields) > 1 && string(stat[open+1:closing]) == name && fields[1] == strconv.Itoa(os.Getpid()) {
			return pid
		}
	}
	return 0
}
