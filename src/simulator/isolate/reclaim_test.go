//go:build linux

package isolate_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// TestReclaimStateDirs: a start removes the state directory an uncleanly
// stopped runtime left (with a disk still mounted under it), but never
// that of a live runtime, however old.
func TestReclaimStateDirs(t *testing.T) {
	requireRoot(t)
	root := t.TempDir()
	old := time.Now().Add(-time.Hour)

	stale := filepath.Join(root, "machines-stale")
	mnt := filepath.Join(stale, "sb-1", "disk")
	if err := os.MkdirAll(mnt, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Unmount(mnt, unix.MNT_DETACH) })

	live := filepath.Join(root, "machines-live")
	rt, err := isolate.New(isolate.Config{StateDir: live})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	for _, d := range []string{stale, live} {
		if err := os.Chtimes(d, old, old); err != nil {
			t.Fatal(err)
		}
	}

	n, err := isolate.ReclaimStateDirs(filepath.Join(root, "machines-*"), nil)
	if err != nil || n != 1 {
		t.Fatalf("reclaimed %d, %v; want 1", n, err)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Errorf("the stale state dir is still there: %v", err)
	}
	if mi, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(mi), stale) {
		t.Errorf("the stale disk mount is still there")
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("the live runtime's state dir was taken: %v", err)
	}
	// A second runtime on the live one's directory is refused.
	if _, err := isolate.New(isolate.Config{StateDir: live}); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("a second runtime on a live state dir: %v; want it refused", err)
	}
}

// TestReclaimStaleCgroups: a runtime's start removes the empty sandbox
// cgroups an earlier runtime left under its cgroup parent, and leaves
// those that hold a process.
func TestReclaimStaleCgroups(t *testing.T) {
	requireRoot(t)
	defer isolate.SetStaleAfter(0)()
	// A live sandbox under the same parent, and an empty leftover.
	rt := newRuntime(t, true)
	sb := start(t, rt, "reclaimlive", nil)
	leftover := filepath.Join("/sys/fs/cgroup/pids", cgroupParent, "sb-leftover")
	if err := os.Mkdir(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	newRuntime(t, true) // its start reclaims
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Errorf("the empty leftover cgroup is still there: %v", err)
	}
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/pids", cgroupParent, sb.ID())); err != nil {
		t.Errorf("the live sandbox's cgroup was taken: %v", err)
	}
	mustOut(t, sb, request{Op: "tag"})
}
