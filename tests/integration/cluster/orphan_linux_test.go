package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// orphanHelperEnv makes the test binary act as a process that starts a
// cluster and then dies without cleaning up; its value is the directory for
// the cluster's files.
const orphanHelperEnv = "CLUSTER_TEST_ORPHAN_HELPER_DIR"

// TestKubeAPIServerDiesWithTestProcess kills a test process that has a
// cluster running, the way a panic in another goroutine or a go test
// timeout ends one without cleanups, and checks that its kube-apiserver
// does not outlive it.
func TestKubeAPIServerDiesWithTestProcess(t *testing.T) {
	if dir := os.Getenv(orphanHelperEnv); dir != "" {
		runOrphanHelper(dir)
		return
	}
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	defer cancel()

	// The helper reuses this process's binary rather than locating it anew.
	bin, err := cluster.APIServerBinary()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestKubeAPIServerDiesWithTestProcess$")
	cmd.Env = append(os.Environ(), orphanHelperEnv+"="+t.TempDir(), cluster.APIServerEnv+"="+bin)
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The cleanup is a backstop for a failure before the kill below.
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	ready := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.TrimSpace(sc.Text()) == "READY" {
				ready <- nil
				return
			}
		}
		ready <- fmt.Errorf("helper ended without starting a cluster: %v", sc.Err())
	}()
	select {
	case err := <-ready:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("helper did not start a cluster in time")
	}

	apiservers := childrenNamed(t, cmd.Process.Pid, "kube-apiserver")
	if len(apiservers) != 1 {
		t.Fatalf("helper %d has kube-apiserver children %v, want one", cmd.Process.Pid, apiservers)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	pid := apiservers[0]
	// Should the wait fail, the orphan is killed, not left running.
	t.Cleanup(func() {
		if !processGone(pid, "kube-apiserver") {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	poll.Until(t, fmt.Sprintf("kube-apiserver %d to go with its killed test process", pid), func() bool {
		return processGone(pid, "kube-apiserver")
	})
}

// runOrphanHelper starts a cluster, says so, and waits to be killed.
func runOrphanHelper(dir string) {
	c, err := cluster.StartContext(context.Background(), dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	_ = c // never stopped: the parent kills this process
	fmt.Println("READY")
	select {}
}

// childrenNamed lists the PIDs of parent's children whose command is name.
func childrenNamed(t *testing.T, parent int, name string) []int {
	t.Helper()
	stats, err := filepath.Glob("/proc/[0-9]*/stat")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, path := range stats {
		b, err := os.ReadFile(path)
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid ...; comm may hold spaces, so split at
		// the last parenthesis.
		s := string(b)
		open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || end < open {
			continue
		}
		fields := strings.Fields(s[end+1:])
		if len(fields) < 2 || s[open+1:end] != name || fields[1] != strconv.Itoa(parent) {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
		if err == nil {
			pids = append(pids, pid)
		}
	}
	return pids
}

// processGone reports whether the process pid running name has exited. A
// zombie counts: the kernel has killed it and only its reaping, by init
// now, is left; so does a reused pid running something else.
func processGone(pid int, name string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open || s[open+1:end] != name {
		return true
	}
	fields := strings.Fields(s[end+1:])
	return len(fields) > 0 && fields[0] == "Z"
}
