//go:build linux

package isolate_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestAvailable(t *testing.T) {
	requireRoot(t)
	if err := isolate.Available(); err != nil {
		t.Fatalf("Available() = %v on this machine, want nil", err)
	}
}

// TestView: the hostname is the sandbox's, / is the template's root
// filesystem and nothing else, the host's files (the repository, the state
// dir) are not there, and the default user is "user" in /home/user.
func TestView(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, false)
	sb := start(t, rt, "view", nil)

	if got := mustOut(t, sb, request{Op: "hostname"}); got != "host-view" {
		t.Errorf("hostname inside = %q, want host-view", got)
	}
	ents, err := os.ReadDir(rootFS)
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, e := range ents {
		want = append(want, e.Name())
	}
	if got := mustOut(t, sb, request{Op: "ls", Path: "/"}); got != strings.Join(want, " ") {
		t.Errorf("ls / inside = %q, want the rootfs's %q", got, strings.Join(want, " "))
	}
	wd, _ := os.Getwd() // the repository's package directory on the host
	for _, hostPath := range []string{wd, filepath.Dir(sb.LayerDir()), rootFS} {
		if r := call(t, sb, request{Op: "ls", Path: hostPath}); r.Err == "" {
			t.Errorf("host path %s visible inside: %q", hostPath, r.Out)
		}
	}
	if got := mustOut(t, sb, request{Op: "ls", Path: "/dev"}); got != "fd full null ptmx pts random shm stderr stdin stdout tty urandom zero" {
		t.Errorf("ls /dev = %q", got)
	}
	if got := mustOut(t, sb, request{Op: "read", Path: "/proc/1/cmdline"}); !strings.HasPrefix(got, "isolate-init:") {
		t.Errorf("PID 1 inside is %q, want the sandbox init", got)
	}
	// A root inside cannot change host-wide sysctls.
	if r := call(t, sb, request{Op: "write", Path: "/proc/sys/kernel/hostname", Data: "x"}); r.Err == "" {
		t.Error("writing /proc/sys inside succeeded")
	}

	got := mustOut(t, sb, request{Op: "id"})
	if want := "uid=1000 gid=1000 cwd=/home/user HOME=/home/user USER=user"; got != want {
		t.Errorf("isolate.Command runs as %q, want %q", got, want)
	}
}

// TestWritesStayInLayer: files written inside land in LayerDir and nowhere
// else on the host; the root filesystem is never written.
func TestWritesStayInLayer(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, false)
	sb := start(t, rt, "write", nil)
	mustOut(t, sb, request{Op: "write", Path: "/home/user/hello.txt", Data: "hi"})
	mustOut(t, sb, request{Op: "write", Path: "/etc/motd", Data: "inside"})
	mustOut(t, sb, request{Op: "id"}) // writes /home/user/from-user.txt as user

	for path, want := range map[string]string{"home/user/hello.txt": "hi", "etc/motd": "inside", "home/user/from-user.txt": "mine"} {
		b, err := os.ReadFile(filepath.Join(sb.LayerDir(), path))
		if err != nil || string(b) != want {
			t.Errorf("LayerDir/%s = %q, %v; want %q", path, b, err, want)
		}
		if _, err := os.Stat(filepath.Join(rootFS, path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the write reached the root filesystem: %s (%v)", path, err)
		}
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(sb.LayerDir(), "home/user/from-user.txt"), &st); err != nil || st.Uid != 1000 {
		t.Errorf("file written by the user is owned by %d (%v), want 1000", st.Uid, err)
	}
	// Nowhere else: only the layer under the state dir has the file.
	var found []string
	_ = filepath.Walk(filepath.Dir(filepath.Dir(sb.LayerDir())), func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Name() == "hello.txt" {
			found = append(found, p)
		}
		return nil
	})
	if len(found) != 1 || found[0] != filepath.Join(sb.LayerDir(), "home/user/hello.txt") {
		t.Errorf("hello.txt found at %v", found)
	}
	// /tmp is the sandbox's tmpfs: neither the host's /tmp nor the layer.
	mustOut(t, sb, request{Op: "write", Path: "/tmp/scratch-" + sb.ID(), Data: "x"})
	if _, err := os.Stat("/tmp/scratch-" + sb.ID()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write to /tmp inside reached the host's /tmp")
	}
}

// TestNetwork: two sandboxes both listen on 127.0.0.1:8000 and Dial reaches
// each one's own; the host's loopback is not reachable from inside.
func TestNetwork(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, false)
	a := start(t, rt, "a", nil)
	b := start(t, rt, "b", nil)
	for i := 0; i < 3; i++ {
		if got := mustOut(t, a, request{Op: "tag"}); got != "a" {
			t.Errorf("Dial(a, 8000) reached %q", got)
		}
		if got := mustOut(t, b, request{Op: "tag"}); got != "b" {
			t.Errorf("Dial(b, 8000) reached %q", got)
		}
	}
	// The inside listener is not the host's: nothing listens on the host.
	if _, err := a.Dial(context.Background(), 8001); err == nil || !strings.Contains(err.Error(), "refused") {
		t.Errorf("Dial to a port nobody listens on inside: %v, want connection refused", err)
	}

	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer host.Close()
	if resp, err := http.Get(host.URL); err != nil {
		t.Fatalf("host server not reachable from the host: %v", err)
	} else {
		resp.Body.Close()
	}
	addr := strings.TrimPrefix(host.URL, "http://")
	if r := call(t, a, request{Op: "dial", Addr: addr}); r.Err == "" {
		t.Errorf("the host's loopback listener %s is reachable from inside", addr)
	}
}

// TestFreeze: Freeze stops the program (its counter file stops moving, the
// relay does not answer) and Thaw resumes it with its memory intact.
func TestFreeze(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, true)
	if !rt.HasFreezer() {
		t.Fatal("no cgroup freezer on this machine (cgroup v1 freezer expected)")
	}
	sb := start(t, rt, "freeze", func(s *isolate.Spec) { s.CPUCount, s.MemoryMiB = 1, 256 })
	mustOut(t, sb, request{Op: "tag"})
	counter := func() int {
		b, err := os.ReadFile(filepath.Join(sb.LayerDir(), "home/user/counter"))
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(b))
		return n
	}
	waitAdvance := func(from int) int {
		var n int
		poll.Until(t, fmt.Sprintf("the counter to advance from %d", from), func() bool {
			n = counter()
			return n > from+3
		})
		return n
	}
	before := waitAdvance(counter())

	if err := sb.Freeze(); err != nil {
		t.Fatal(err)
	}
	frozenAt := counter()
	// Every task of the sandbox sleeps in the freezer: nothing of it can
	// run (no need to watch the counter stand still for a while).
	if err := sb.CheckFrozen(); err != nil {
		t.Error(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	if c, err := sb.Dial(ctx, port); err == nil {
		c.Close()
		t.Error("Dial answered while frozen")
	}
	cancel()

	if err := sb.Thaw(); err != nil {
		t.Fatal(err)
	}
	if n := waitAdvance(frozenAt); n < before {
		t.Errorf("counter went back after thaw: %d < %d", n, before)
	}
	if got := mustOut(t, sb, request{Op: "tag"}); got != "freeze" {
		t.Errorf("after thaw: %q", got)
	}
	// The limits were applied to the sandbox's cgroup.
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/memory", cgroupParent, sb.ID(), "memory.limit_in_bytes")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(256<<20) {
		t.Errorf("memory limit = %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpu", cgroupParent, sb.ID(), "cpu.cfs_quota_us")); err != nil || strings.TrimSpace(string(b)) != "100000" {
		t.Errorf("cpu quota = %q, %v", b, err)
	}
}

// TestSaveLayerFrom: SaveLayer then Start(From) carries written files and
// deletions (overlay whiteouts) to a new sandbox; processes are not carried.
func TestSaveLayerFrom(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, true)
	a := start(t, rt, "src", nil)
	mustOut(t, a, request{Op: "write", Path: "/home/user/state.txt", Data: "kept"})
	mustOut(t, a, request{Op: "remove", Path: "/rootfs-marker"})
	saved := filepath.Join(t.TempDir(), "checkpoint")
	if err := a.SaveLayer(saved); err != nil {
		t.Fatal(err)
	}
	// SaveLayer thawed the sandbox again.
	mustOut(t, a, request{Op: "tag"})

	b := start(t, rt, "fork", func(s *isolate.Spec) { s.From = saved })
	if got := mustOut(t, b, request{Op: "read", Path: "/home/user/state.txt"}); got != "kept" {
		t.Errorf("state.txt in the fork = %q", got)
	}
	if r := call(t, b, request{Op: "read", Path: "/rootfs-marker"}); r.Err == "" {
		t.Errorf("a file deleted before SaveLayer is back in the fork: %q", r.Out)
	}
	if got := mustOut(t, b, request{Op: "hostname"}); got != "host-fork" {
		t.Errorf("fork hostname %q", got)
	}
	// The fork's writes are its own.
	mustOut(t, b, request{Op: "write", Path: "/home/user/state.txt", Data: "fork's"})
	if got := mustOut(t, a, request{Op: "read", Path: "/home/user/state.txt"}); got != "kept" {
		t.Errorf("source sees the fork's write: %q", got)
	}
}

// TestReapsOrphans: a process orphaned inside is reaped by the sandbox's
// PID 1, and the program's own exec.Cmd.Wait still gets its child's status.
func TestReapsOrphans(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, false)
	sb := start(t, rt, "reap", nil)
	orphan := mustOut(t, sb, request{Op: "orphan"}) // errors if Wait lost the status
	if _, err := strconv.Atoi(orphan); err != nil {
		t.Fatalf("the orphan's pid: %q", orphan)
	}
	// The orphan exits once its parent has; without a reaping PID 1 it
	// would stay, a zombie, in /proc.
	poll.UntilNil(t, "the orphan "+orphan+" to be reaped", func() error {
		if pids := strings.Fields(mustOut(t, sb, request{Op: "pids"})); slices.Contains(pids, orphan) {
			return fmt.Errorf("still in /proc (zombies: %q)", mustOut(t, sb, request{Op: "zombies"}))
		}
		return nil
	})
	if z := mustOut(t, sb, request{Op: "zombies"}); z != "" {
		t.Fatalf("zombies left inside: %s", z)
	}
}

// TestCloseLeavesNothing: Close kills every process (including the ones the
// program started), leaves no mount, interface or cgroup, removes the
// sandbox's directory, and is idempotent.
func TestCloseLeavesNothing(t *testing.T) {
	requireRoot(t)
	before := snapshotHost(t)
	rt := newRuntime(t, true)
	var sbs []*isolate.Sandbox
	for _, tag := range []string{"c1", "c2"} {
		sb := start(t, rt, tag, func(s *isolate.Spec) { s.MemoryMiB = 128 })
		mustOut(t, sb, request{Op: "tag"})
		sbs = append(sbs, sb)
	}
	if err := sbs[1].Freeze(); err != nil { // a frozen sandbox must close too
		t.Fatal(err)
	}
	during := snapshotHost(t)
	if during.mounts != before.mounts {
		t.Errorf("host mounts changed while sandboxes run: %d → %d (a sandbox mount leaked to the host)", before.mounts, during.mounts)
	}
	if len(during.isolated) < 4 {
		t.Errorf("expected an init and a program per sandbox, saw %v", during.isolated)
	}
	for _, sb := range sbs {
		dir := filepath.Dir(sb.LayerDir())
		pid := sb.PID()
		if err := sb.Close(); err != nil {
			t.Fatal(err)
		}
		if err := sb.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
		select {
		case <-sb.Done():
		default:
			t.Error("Done not closed after Close")
		}
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("init %d still exists after Close: %v", pid, err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("sandbox dir %s left: %v", dir, err)
		}
		for _, ctl := range []string{"freezer", "memory", "cpu"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", ctl, cgroupParent, sb.ID())); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("cgroup %s/%s left: %v", ctl, sb.ID(), err)
			}
		}
		if _, err := sb.Dial(context.Background(), port); !errors.Is(err, isolate.ErrClosed) {
			t.Errorf("Dial after Close: %v", err)
		}
	}
	after := snapshotHost(t)
	if after.mounts != before.mounts {
		t.Errorf("mounts: %d before, %d after", before.mounts, after.mounts)
	}
	if !slices.Equal(after.isolated, before.isolated) {
		t.Errorf("sandbox processes left: %v (before: %v)", after.isolated, before.isolated)
	}
	if after.interfaces != before.interfaces {
		t.Errorf("network interfaces: %d before, %d after", before.interfaces, after.interfaces)
	}
}

// TestStartErrors: bad specs fail before anything is created, and a
// failing setup leaves nothing behind.
func TestStartErrors(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, true)
	before := snapshotHost(t)
	for name, mod := range map[string]func(*isolate.Spec){
		"bad id":       func(s *isolate.Spec) { s.ID = "../x" },
		"no program":   func(s *isolate.Spec) { s.Program = "nope" },
		"no rootfs":    func(s *isolate.Spec) { s.RootFS = "/nonexistent" },
		"unknown user": func(s *isolate.Spec) { s.User = "nobody-here" },
		"missing From": func(s *isolate.Spec) { s.From = "/nonexistent" },
	} {
		spec := isolate.Spec{ID: "err-" + strings.ReplaceAll(name, " ", "-"), RootFS: rootFS, User: "user", Program: "probe", Config: []byte(`{"Port":8000}`)}
		mod(&spec)
		if sb, err := rt.Start(context.Background(), spec); err == nil {
			sb.Close()
			t.Errorf("%s: Start succeeded", name)
		}
	}
	after := snapshotHost(t)
	if after.mounts != before.mounts || !slices.Equal(after.isolated, before.isolated) {
		t.Errorf("failed starts left state: %+v → %+v", before, after)
	}
	ents, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup/freezer", cgroupParent))
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "err-") {
			t.Errorf("cgroup %s left by a failed start", e.Name())
		}
	}
}

// BenchmarkStartDial is the cost a warm pool pays per prepared sandbox:
// Start (namespaces, overlay, /dev, /proc, pivot_root, program) until the
// first Dial of the program's listener succeeds. Close is not timed.
func BenchmarkStartDial(b *testing.B) {
	requireRoot(b)
	for _, bench := range []struct {
		name    string
		diskMiB int
	}{{"layer-dir", 0}, {"bounded-disk", 2048}} {
		b.Run(bench.name, func(b *testing.B) {
			rt := newRuntime(b, true)
			cfg := []byte(`{"Port":8000,"Tag":"bench"}`)
			ctx := context.Background()
			for i := 0; b.Loop(); i++ {
				sb, err := rt.Start(ctx, isolate.Spec{
					ID: "bench-" + strconv.Itoa(i), RootFS: rootFS, User: "user",
					Program: "probe", Config: cfg, CPUCount: 1, MemoryMiB: 256, DiskMiB: bench.diskMiB,
				})
				if err != nil {
					b.Fatal(err)
				}
				c, err := dialReady(ctx, sb, port)
				if err != nil {
					b.Fatal(err)
				}
				c.Close()
				b.StopTimer()
				if err := sb.Close(); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}

// TestLongStateDir: a state dir whose relay socket path exceeds sun_path
// (108 bytes) still works (the socket is reached through a directory fd).
func TestLongStateDir(t *testing.T) {
	requireRoot(t)
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 100))
	rt, err := isolate.New(isolate.Config{StateDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	sb := start(t, rt, "long", nil)
	if len(sb.RelaySocket()) < 108 {
		t.Fatalf("relay path %d bytes; the test needs more than 108", len(sb.RelaySocket()))
	}
	if got := mustOut(t, sb, request{Op: "tag"}); got != "long" {
		t.Errorf("got %q", got)
	}
}
