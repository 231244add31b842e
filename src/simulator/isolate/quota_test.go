//go:build linux

package isolate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

func init() {
	limitHelpers["fill"] = helperFill
}

// helperFill writes 1 MiB blocks to the file arg until a write fails (or
// 4 GiB, far past every bound here), syncs, and prints how far it got.
func helperFill(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Println("create:", err)
		return
	}
	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i) // not zeros: nothing may store them sparse
	}
	mib := 0
	var werr error
	for mib < 4096 {
		if _, werr = f.Write(block); werr != nil {
			break
		}
		mib++
	}
	if werr == nil {
		werr = f.Sync()
	}
	f.Close()
	fmt.Printf("wrote=%d err=%v\n", mib, werr)
}

// fillInside runs the fill helper at path and returns the MiB written and
// the error text.
func fillInside(t *testing.T, sb *isolate.Sandbox, path string) (int, string) {
	t.Helper()
	out := mustOut(t, sb, request{Op: "helper", Data: "fill", Path: path})
	var mib int
	i := strings.Index(out, "wrote=")
	if i < 0 {
		t.Fatalf("fill %s said %q", path, out)
	}
	if _, err := fmt.Sscanf(out[i:], "wrote=%d", &mib); err != nil {
		t.Fatalf("fill %s said %q: %v", path, out, err)
	}
	_, e, _ := strings.Cut(out[i:], " err=")
	return mib, e
}

// TestDiskBound: with DiskMiB the writable layer is a filesystem of that
// size; writing past it gets ENOSPC inside, the host's disk loses at most
// the bound, the sandbox works on, and Close leaves no mount or loop
// device behind.
func TestDiskBound(t *testing.T) {
	requireRoot(t)
	const diskMiB = 64
	sb := rootSandbox(t, "disk", func(s *isolate.Spec) { s.DiskMiB = diskMiB })
	var before unix.Statfs_t
	if err := unix.Statfs(sb.LayerDir(), &before); err != nil {
		t.Fatal(err)
	}
	if before.Type != unix.EXT4_SUPER_MAGIC || uint64(before.Bsize)*before.Blocks > diskMiB<<20 {
		t.Fatalf("layer filesystem type %#x of %d bytes; want ext4 of at most %d MiB", before.Type, uint64(before.Bsize)*before.Blocks, diskMiB)
	}

	mib, why := fillInside(t, sb, "/root/fill")
	if mib > diskMiB || !strings.Contains(why, "no space left on device") {
		t.Errorf("filling the disk: wrote %d MiB, %s; want at most %d MiB, then ENOSPC", mib, why, diskMiB)
	}
	// The rest of the sandbox carries on: the program answers, commands
	// start, and freeing the file frees the room.
	if got := mustOut(t, sb, request{Op: "helper", Data: "hello"}); got != "ran" {
		t.Errorf("a command on a full disk said %q", got)
	}
	image := filepath.Join(sb.Dir(), "disk.img")
	var st unix.Stat_t
	if err := unix.Stat(image, &st); err != nil {
		t.Fatal(err)
	}
	if used := st.Blocks * 512; used > (diskMiB+1)<<20 {
		t.Errorf("the disk image holds %d bytes of the host's disk, bound %d MiB", used, diskMiB)
	}

	dir := sb.Dir()
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(mi), dir) {
		t.Errorf("a mount under %s is left after Close", dir)
	}
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backing {
		if f, err := os.ReadFile(b); err == nil && strings.HasPrefix(string(f), dir) {
			t.Errorf("%s still backs a loop device after Close: %s", strings.TrimSpace(string(f)), b)
		}
	}
}

// TestTmpfsBound: /tmp and /dev/shm are each a quarter of the memory
// limit; filling both gets ENOSPC, not an out-of-memory kill, and the
// sandbox works on.
func TestTmpfsBound(t *testing.T) {
	requireRoot(t)
	const memMiB = 256
	sb := rootSandbox(t, "tmpfs", func(s *isolate.Spec) { s.MemoryMiB = memMiB })
	for _, p := range []string{"/tmp/fill", "/dev/shm/fill"} {
		mib, err := fillInside(t, sb, p)
		if mib > memMiB/4 || !strings.Contains(err, "no space left on device") {
			t.Errorf("filling %s: wrote %d MiB, %s; want at most %d MiB, then ENOSPC", p, mib, err, memMiB/4)
		}
	}
	select {
	case <-sb.Done():
		t.Fatalf("the sandbox ended after its tmpfs mounts filled: %v", sb.Err())
	default:
	}
	if got := mustOut(t, sb, request{Op: "helper", Data: "hello"}); got != "ran" {
		t.Errorf("a command with full tmpfs mounts said %q", got)
	}
}

// TestDiskBoundNeedsMkfs: a disk bound on a host without mkfs.ext4 fails the
// start with an error that says so, rather than running unbounded.
func TestDiskBoundNeedsMkfs(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, false)
	t.Setenv("PATH", t.TempDir())
	restore := isolate.SetMkfsSearchPath(nil)
	defer restore()
	_, err := rt.Start(t.Context(), isolate.Spec{ID: "nomkfs", RootFS: rootFS, Program: "probe", DiskMiB: 16})
	if err == nil || !strings.Contains(err.Error(), "mkfs.ext4") {
		t.Fatalf("start without mkfs.ext4: %v; want an error naming it", err)
	}
}
