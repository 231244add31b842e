//go:build linux

package isolate_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

func init() {
	limitHelpers["directio"] = helperDirectIO
}

// helperDirectIO writes blocks of blockKiB to a file with O_DIRECT (the
// page cache cannot absorb them), then reads them back the same way, and
// prints how long each pass took. arg is "path:blocks:blockKiB".
func helperDirectIO(arg string) {
	parts := strings.Split(arg, ":")
	if len(parts) != 3 {
		fmt.Println("bad arg:", arg)
		return
	}
	blocks, _ := strconv.Atoi(parts[1])
	kib, _ := strconv.Atoi(parts[2])
	// O_DIRECT needs an aligned buffer: a mapping is page aligned.
	buf, err := unix.Mmap(-1, 0, kib<<10, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	if err != nil {
		fmt.Println("mmap:", err)
		return
	}
	for i := range buf {
		buf[i] = byte(i)
	}
	pass := func(flags int, do func(fd int) (int, error)) (time.Duration, error) {
		fd, err := unix.Open(parts[0], flags|unix.O_DIRECT|unix.O_CLOEXEC, 0o644)
		if err != nil {
			return 0, err
		}
		defer unix.Close(fd)
		began := time.Now()
		for range blocks {
			if n, err := do(fd); err != nil || n != len(buf) {
				return 0, fmt.Errorf("%d of %d bytes: %v", n, len(buf), err)
			}
		}
		return time.Since(began), nil
	}
	write, werr := pass(unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, func(fd int) (int, error) { return unix.Write(fd, buf) })
	read, rerr := pass(unix.O_RDONLY, func(fd int) (int, error) { return unix.Read(fd, buf) })
	if werr != nil || rerr != nil {
		fmt.Println("write:", werr, "read:", rerr)
		return
	}
	fmt.Printf("write=%d read=%d\n", write.Milliseconds(), read.Milliseconds())
}

// directIOInside runs the directio helper and returns how long the write
// and the read pass took.
func directIOInside(t *testing.T, sb *isolate.Sandbox, blocks, blockKiB int) (write, read time.Duration) {
	t.Helper()
	out := mustOut(t, sb, request{Op: "helper", Data: "directio", Path: fmt.Sprintf("/root/io:%d:%d", blocks, blockKiB)})
	var w, r int64
	if _, err := fmt.Sscanf(out, "write=%d read=%d", &w, &r); err != nil {
		t.Fatalf("directio said %q: %v", out, err)
	}
	return time.Duration(w) * time.Millisecond, time.Duration(r) * time.Millisecond
}

// loopDevice is the major:minor of the loop device backed by the sandbox's
// disk image.
func loopDevice(t *testing.T, sb *isolate.Sandbox) string {
	t.Helper()
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backing {
		if f, err := os.ReadFile(b); err == nil && strings.HasPrefix(string(f), sb.Dir()) {
			dev, err := os.ReadFile(filepath.Join(filepath.Dir(filepath.Dir(b)), "dev"))
			if err != nil {
				t.Fatal(err)
			}
			return strings.TrimSpace(string(dev))
		}
	}
	t.Fatalf("no loop device is backed by %s", sb.Dir())
	return ""
}

// cgroupV2 says whether the host runs the unified hierarchy.
func cgroupV2() bool {
	_, err := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	return err == nil
}

// ioThrottle is the limit of one kind ("wbps", "riops", …) the sandbox's
// cgroup sets on dev, as a number; "" when it sets none.
func ioThrottle(t *testing.T, sb *isolate.Sandbox, dev, kind string) string {
	t.Helper()
	if cgroupV2() {
		b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup", cgroupParent, sb.ID(), "io.max"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) > 0 && f[0] == dev {
				for _, kv := range f[1:] {
					if k, v, _ := strings.Cut(kv, "="); k == kind && v != "max" {
						return v
					}
				}
			}
		}
		return ""
	}
	v1 := map[string]string{"rbps": "read_bps", "wbps": "write_bps", "riops": "read_iops", "wiops": "write_iops"}[kind]
	b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/blkio", cgroupParent, sb.ID(), "blkio.throttle."+v1+"_device"))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) == 2 && f[0] == dev {
			return f[1]
		}
	}
	return ""
}

// bytesWritten is what the sandbox's cgroup was charged for writes to dev.
func bytesWritten(t *testing.T, sb *isolate.Sandbox, dev string) int64 {
	t.Helper()
	file := filepath.Join("/sys/fs/cgroup/blkio", cgroupParent, sb.ID(), "blkio.throttle.io_service_bytes")
	if cgroupV2() {
		file = filepath.Join("/sys/fs/cgroup", cgroupParent, sb.ID(), "io.stat")
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] != dev {
			continue
		}
		for i, v := range f[1:] {
			if n, ok := strings.CutPrefix(v, "wbytes="); ok { // v2
				w, _ := strconv.ParseInt(n, 10, 64)
				return w
			}
			if v == "Write" && i+2 < len(f) { // v1: "dev Write n"
				w, _ := strconv.ParseInt(f[i+2], 10, 64)
				return w
			}
		}
	}
	return 0
}

// TestDiskRateLimit: a sandbox's disk (its loop device) is throttled to
// DiskBytesPerSec and DiskIOPS, each direction on its own, and the I/O is
// charged to the sandbox's cgroup. Only lower bounds on time are checked: a
// busy machine makes the passes slower, never faster than the throttle.
func TestDiskRateLimit(t *testing.T) {
	requireRoot(t)
	const rate = 4 << 20 // bytes a second
	// Each limit alone, on a pass that takes 2 s each way at the limit:
	// 8 MiB at 4 MiB/s, and 100 operations at 50 a second.
	for _, c := range []struct {
		name           string
		limit          func(*isolate.Spec)
		kinds          []string
		want           int
		blocks, blockK int
	}{
		{"bandwidth", func(s *isolate.Spec) { s.DiskBytesPerSec = rate }, []string{"rbps", "wbps"}, rate, 8, 1024},
		{"operations", func(s *isolate.Spec) { s.DiskIOPS = 50 }, []string{"riops", "wiops"}, 50, 100, 4},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			sb := rootSandbox(t, "io"+c.name, func(s *isolate.Spec) { s.DiskMiB = 64; c.limit(s) })
			dev := loopDevice(t, sb)
			for _, kind := range c.kinds {
				if got := ioThrottle(t, sb, dev, kind); got != strconv.Itoa(c.want) {
					t.Errorf("%s on %s = %q, want %d", kind, dev, got, c.want)
				}
			}
			write, read := directIOInside(t, sb, c.blocks, c.blockK)
			if min := 1500 * time.Millisecond; write < min || read < min {
				t.Errorf("%d blocks of %d KiB at %s %d: written in %v, read in %v; want each at least %v",
					c.blocks, c.blockK, c.kinds[0], c.want, write, read, min)
			}
			if charged, want := bytesWritten(t, sb, dev), int64(c.blocks*c.blockK)<<10; charged < want {
				t.Errorf("the sandbox's cgroup was charged %d bytes written to %s, want at least %d", charged, dev, want)
			}
		})
	}
	t.Run("needs a disk", func(t *testing.T) {
		t.Parallel()
		// Without a bounded disk there is no device to throttle: the
		// sandbox starts, and no throttle is set.
		sb := rootSandbox(t, "ionodisk", func(s *isolate.Spec) { s.DiskBytesPerSec = rate })
		file := filepath.Join("/sys/fs/cgroup/blkio", cgroupParent, sb.ID(), "blkio.throttle.write_bps_device")
		if cgroupV2() {
			file = filepath.Join("/sys/fs/cgroup", cgroupParent, sb.ID(), "io.max")
		}
		if b, err := os.ReadFile(file); err != nil || strings.TrimSpace(string(b)) != "" {
			t.Errorf("%s = %q, %v without a disk, want empty", file, b, err)
		}
	})
}
