//go:build linux

package isolate_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// limitHelpers run inside a sandbox (see the "helper" request) and print
// what they could do; the tests run them as root inside.
var limitHelpers = map[string]func(arg string){
	"fdscan":   helperFDScan,
	"ptrace":   helperPtrace,
	"nice":     helperNice,
	"forkbomb": helperForkBomb,
	"hello":    func(string) { fmt.Println("ran") },
}

func isCgroupFS(path string) bool {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return false
	}
	return st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC
}

// helperFDScan looks through every /proc/<pid>/fd it can reach for a
// descriptor on a cgroup filesystem and tries to lift the CPU limit through
// it, the way the adversarial probe did (issue 28).
func helperFDScan(string) {
	fmt.Printf("program %d\n", os.Getppid())
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		dir := "/proc/" + e.Name() + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			fmt.Printf("pid %s: %v\n", e.Name(), err)
			continue
		}
		reached := 0
		for _, fd := range fds {
			p := dir + "/" + fd.Name()
			if _, err := os.Readlink(p); err != nil {
				continue
			}
			reached++
			if !isCgroupFS(p) {
				continue
			}
			target, _ := os.Readlink(p)
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err == nil {
				_, err = f.Write([]byte("-1"))
				f.Close()
			}
			fmt.Printf("cgroup-fd %s -> %s: write -1: %v\n", p, target, err)
		}
		fmt.Printf("pid %s: %d of %d descriptors reached\n", e.Name(), reached, len(fds))
	}
}

// helperPtrace tries PTRACE_ATTACH on the init (1) and the program (its
// parent).
func helperPtrace(string) {
	runtime.LockOSThread() // ptrace requests belong to the attaching thread
	for _, pid := range []int{1, os.Getppid()} {
		who := map[bool]string{true: "init", false: "program"}[pid == 1]
		if err := unix.PtraceAttach(pid); err != nil {
			fmt.Printf("attach %s: %v\n", who, err)
			continue
		}
		// Do not leave it stopped: wait for the stop, then let it go.
		var ws unix.WaitStatus
		_, _ = unix.Wait4(pid, &ws, unix.WALL, nil)
		_ = unix.PtraceDetach(pid)
		fmt.Printf("attach %s: attached\n", who)
	}
}

// helperNice tries to raise its priority to -20, directly and after raising
// RLIMIT_NICE, and prints the niceness it ends with.
func helperNice(string) {
	runtime.LockOSThread() // nice is per thread on Linux
	set := unix.Setpriority(unix.PRIO_PROCESS, 0, -20)
	rl := unix.Setrlimit(unix.RLIMIT_NICE, &unix.Rlimit{Cur: 40, Max: 40})
	set2 := unix.Setpriority(unix.PRIO_PROCESS, 0, -20)
	st, _ := os.ReadFile("/proc/thread-self/stat")
	nice := "?"
	if i := bytes.LastIndexByte(st, ')'); i >= 0 {
		// Fields after the comm: state is field 3, nice is field 19.
		if f := strings.Fields(string(st[i+1:])); len(f) > 16 {
			nice = f[16]
		}
	}
	fmt.Printf("nice=%s setpriority=%v setrlimit=%v setpriority-after-rlimit=%v\n", nice, set, rl, set2)
}

var forkByte [1]byte

// forkBlocked forks a child that only waits for rfd to reach EOF and exits.
// The child of a raw fork has one thread of a Go runtime that believes it
// has many, so it runs raw system calls only (nosplit, norace).
//
//go:norace
//go:nosplit
func forkBlocked(rfd, wfd uintptr) (uintptr, syscall.Errno) {
	pid, _, errno := syscall.RawSyscall6(syscall.SYS_CLONE, uintptr(syscall.SIGCHLD), 0, 0, 0, 0, 0)
	if errno != 0 || pid != 0 {
		return pid, errno
	}
	syscall.RawSyscall(syscall.SYS_CLOSE, wfd, 0, 0)
	syscall.RawSyscall(syscall.SYS_READ, rfd, uintptr(unsafe.Pointer(&forkByte[0])), 1)
	syscall.RawSyscall(syscall.SYS_EXIT_GROUP, 0, 0, 0)
	return 0, 0
}

// helperForkBomb forks up to arg children that stay until it is done, stops
// at the first failure, then lets them all go and reaps them.
func helperForkBomb(arg string) {
	most, _ := strconv.Atoi(arg)
	var p [2]int
	if err := syscall.Pipe2(p[:], syscall.O_CLOEXEC); err != nil {
		fmt.Println("pipe:", err)
		return
	}
	forked := 0
	var ferr error
	for forked < most {
		if _, errno := forkBlocked(uintptr(p[0]), uintptr(p[1])); errno != 0 {
			ferr = errno
			break
		}
		forked++
	}
	syscall.Close(p[1])
	for {
		if _, err := syscall.Wait4(-1, nil, 0, nil); err == syscall.ECHILD {
			break
		}
	}
	fmt.Printf("forked=%d err=%v\n", forked, ferr)
}

// rootSandbox starts a sandbox with cgroups whose commands run as root.
func rootSandbox(t *testing.T, tag string, mod func(*isolate.Spec)) *isolate.Sandbox {
	t.Helper()
	rt := newRuntime(t, true)
	sb := start(t, rt, tag, func(s *isolate.Spec) {
		s.User = ""
		s.CPUCount = 1
		if mod != nil {
			mod(s)
		}
	})
	mustOut(t, sb, request{Op: "tag"}) // the program is up
	return sb
}

// cgroupPIDs are the host pids in the sandbox's cgroup (v1 cpu hierarchy).
func cgroupPIDs(t *testing.T, sb *isolate.Sandbox) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", cgroupParent, sb.ID(), "cgroup.procs"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b))
}

// TestNoHostCgroupDescriptorInside: no process of the sandbox holds a
// descriptor on a cgroup file (the Go runtime of the init and the program
// would keep the CPU limit files open), and root inside cannot lift the
// CPU quota through any descriptor it can reach.
func TestNoHostCgroupDescriptorInside(t *testing.T) {
	requireRoot(t)
	sb := rootSandbox(t, "fds", nil)
	quota := filepath.Join("/sys/fs/cgroup/cpu", cgroupParent, sb.ID(), "cpu.cfs_quota_us")

	// From the host, which sees every descriptor.
	pids := cgroupPIDs(t, sb)
	if len(pids) < 2 {
		t.Fatalf("sandbox cgroup holds %v, want at least the init and the program", pids)
	}
	for _, pid := range pids {
		fds, err := os.ReadDir("/proc/" + pid + "/fd")
		if err != nil {
			t.Fatal(err)
		}
		for _, fd := range fds {
			p := "/proc/" + pid + "/fd/" + fd.Name()
			if isCgroupFS(p) {
				target, _ := os.Readlink(p)
				t.Errorf("sandbox process %s holds fd %s on the cgroup file %s", pid, fd.Name(), target)
			}
		}
	}

	// From inside, as root.
	out := mustOut(t, sb, request{Op: "helper", Data: "fdscan"})
	if strings.Contains(out, "cgroup-fd") {
		t.Errorf("root inside reached a cgroup file through /proc/<pid>/fd:\n%s", out)
	}
	var program int
	if _, err := fmt.Sscanf(out, "program %d", &program); err != nil || !strings.Contains(out, "\npid 1:") || !strings.Contains(out, fmt.Sprintf("\npid %d:", program)) {
		t.Errorf("the scan did not see the init and the program:\n%s", out)
	}
	if b, err := os.ReadFile(quota); err != nil || strings.TrimSpace(string(b)) != "100000" {
		t.Errorf("CPU quota on the host after the attempt = %q, %v; want 100000", b, err)
	}
}

// TestRootInsideCannotPtraceOrRenice: root inside can neither ptrace the
// init or the program nor raise its CPU priority, even after trying to lift
// RLIMIT_NICE.
func TestRootInsideCannotPtraceOrRenice(t *testing.T) {
	requireRoot(t)
	sb := rootSandbox(t, "ptrace", nil)
	out := mustOut(t, sb, request{Op: "helper", Data: "ptrace"})
	for _, want := range []string{"attach init: operation not permitted", "attach program: operation not permitted"} {
		if !strings.Contains(out, want) {
			t.Errorf("ptrace from root inside: %q, want %q", out, want)
		}
	}
	// The program still serves after the attempt (it was not left stopped).
	mustOut(t, sb, request{Op: "tag"})

	out = mustOut(t, sb, request{Op: "helper", Data: "nice"})
	if !strings.HasPrefix(out, "nice=0 setpriority=permission denied") || !strings.Contains(out, "setpriority-after-rlimit=permission denied") {
		t.Errorf("renice from root inside: %q, want it refused and niceness 0", out)
	}
}

// TestForkBombStopsAtPidsLimit: a sandbox cannot have more tasks than its
// MaxPIDs; forking past it fails with EAGAIN, the host never counts more
// tasks in the sandbox's cgroup, and the sandbox works on afterwards. Its
// pids cgroup is gone after Close.
func TestForkBombStopsAtPidsLimit(t *testing.T) {
	requireRoot(t)
	const limit = 64
	sb := rootSandbox(t, "forkbomb", func(s *isolate.Spec) { s.MaxPIDs = limit })
	pidsDir := filepath.Join("/sys/fs/cgroup/pids", cgroupParent, sb.ID())
	// Every task of the sandbox, threads included, as the host sees them
	// (the freezer hierarchy exists with or without the pids one).
	tasks := filepath.Join("/sys/fs/cgroup/freezer", cgroupParent, sb.ID(), "tasks")

	var peak atomic.Int64
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(200 * time.Microsecond)
		defer tick.Stop()
		for {
			if b, err := os.ReadFile(tasks); err == nil {
				if n := int64(strings.Count(string(b), "\n")); n > peak.Load() {
					peak.Store(n)
				}
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	out := mustOut(t, sb, request{Op: "helper", Data: "forkbomb", Path: strconv.Itoa(4 * limit)})
	close(stop)
	<-sampled

	var forked int
	var ferr string
	if _, err := fmt.Sscanf(out, "forked=%d err=%s", &forked, &ferr); err != nil {
		t.Fatalf("fork bomb said %q: %v", out, err)
	}
	if forked > limit || !strings.Contains(out, "resource temporarily unavailable") {
		t.Errorf("fork bomb inside: %q; want at most %d children, then EAGAIN", out, limit)
	}
	if p := peak.Load(); p > limit {
		t.Errorf("the host counted %d tasks in the sandbox's cgroup, limit %d", p, limit)
	}
	if b, err := os.ReadFile(filepath.Join(pidsDir, "pids.max")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(limit) {
		t.Errorf("pids.max = %q, %v; want %d", b, err, limit)
	}
	// The sandbox works on: the program answers and starts a command.
	if got := mustOut(t, sb, request{Op: "helper", Data: "hello"}); got != "ran" {
		t.Errorf("a command after the fork bomb said %q", got)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(pidsDir); !os.IsNotExist(err) {
		t.Errorf("pids cgroup %s after Close: %v", pidsDir, err)
	}
}

// TestDefaultPidsLimitScalesWithCPUs: without MaxPIDs, the cap is
// PIDsPerCPU per CPU of the size tier.
func TestDefaultPidsLimitScalesWithCPUs(t *testing.T) {
	requireRoot(t)
	sb := rootSandbox(t, "pidsdefault", func(s *isolate.Spec) { s.CPUCount = 2 })
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/pids", cgroupParent, sb.ID(), "pids.max"))
	if want := strconv.Itoa(2 * isolate.PIDsPerCPU); err != nil || strings.TrimSpace(string(b)) != want {
		t.Errorf("pids.max = %q, %v; want %s", b, err, want)
	}
}
