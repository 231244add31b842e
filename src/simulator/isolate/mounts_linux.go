package isolate

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// buildRoot mounts the sandbox's root filesystem at spec.Merged, in the
// init's own mount namespace: the overlay, then /dev, /proc and /tmp on it.
func buildRoot(s *initSpec) error {
	// The namespace starts as a copy of the host's mounts, with the host's
	// propagation; making all of it private first is what keeps every mount
	// below from appearing on the host (and host mounts from appearing here).
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make mounts private: %w", err)
	}
	if s.Views {
		if err := enterSandboxDir(os.NewFile(fdAttach, "attach")); err != nil {
			return err
		}
	}

	// overlayfs lists lower directories top first, separated by ':'.
	lower := strings.Join(append(append([]string(nil), s.Layers...), s.RootFS), ":")
	opts := overlayOptions(lower, s.Upper, s.Work, s.UserNS)
	if err := unix.Mount("overlay", s.Merged, "overlay", 0, opts); err != nil {
		return fmt.Errorf("mount overlay (%s): %w", opts, err)
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{"proc", 0o555}, {"dev", 0o755}, {"tmp", 0o1777}} {
		if err := ensureDir(filepath.Join(s.Merged, d.name), d.mode); err != nil {
			return err
		}
	}
	tmpfsSize := "size=" + strconv.Itoa(s.TmpfsMiB) + "m"
	if err := mountDev(filepath.Join(s.Merged, "dev"), s.UserNS, !s.Rootless, tmpfsSize); err != nil {
		return err
	}
	if err := mountProc(filepath.Join(s.Merged, "proc"), filepath.Join(s.Merged, "dev", "null")); err != nil {
		return err
	}
	if err := unix.Mount("tmpfs", filepath.Join(s.Merged, "tmp"), "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,"+tmpfsSize); err != nil {
		return fmt.Errorf("mount /tmp: %w", err)
	}
	return bindMounts(s.Merged, s.Mounts)
}

// overlayOptions builds the overlay mount data. Inside a user namespace the
// overlay keeps its metadata in user.* xattrs (trusted.* needs host root).
func overlayOptions(lower, upper, work string, userns bool) string {
	opts := "lowerdir=" + lower + ",upperdir=" + upper + ",workdir=" + work
	if userns {
		opts += ",userxattr"
	}
	return opts
}

// checkOverlayPath rejects paths the overlay option syntax cannot carry.
func checkOverlayPath(p string) error {
	if strings.ContainsAny(p, ",:\\") {
		return fmt.Errorf("isolate: path %q contains ',' ':' or '\\', which overlayfs options cannot carry", p)
	}
	return nil
}

// lowerLayers resolves Spec.Layers to absolute directories the overlay
// options can carry.
func lowerLayers(layers []string) ([]string, error) {
	out := make([]string, 0, len(layers))
	for _, l := range layers {
		abs, err := filepath.Abs(l)
		if err != nil {
			return nil, fmt.Errorf("isolate: layer %q: %w", l, err)
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("isolate: layer %q is not a directory", l)
		}
		if err := checkOverlayPath(abs); err != nil {
			return nil, err
		}
		out = append(out, abs)
	}
	return out, nil
}

// ensureDir makes p a real directory. A symlink is refused rather than
// followed: a writable layer saved from another sandbox could otherwise
// point a mount point anywhere.
func ensureDir(p string, mode os.FileMode) error {
	fi, err := os.Lstat(p)
	switch {
	case errors.Is(err, os.ErrNotExist):
		if err := os.Mkdir(p, mode); err != nil {
			return err
		}
		return os.Chmod(p, mode) // Mkdir applies the umask
	case err != nil:
		return err
	case !fi.IsDir():
		return fmt.Errorf("isolate: %s in the root filesystem is not a directory", p)
	}
	return nil
}

// devices are the nodes of the minimal /dev.
var devices = []struct {
	name         string
	major, minor uint32
}{
	{"null", 1, 3}, {"zero", 1, 5}, {"full", 1, 7},
	{"random", 1, 8}, {"urandom", 1, 9}, {"tty", 5, 0},
}

// mountDev builds /dev on its own tmpfs. As real root the nodes are made
// with mknod; in a user namespace mknod is not allowed, so the host's nodes
// are bind-mounted onto empty files instead.
func mountDev(dev string, userns, ttyGroup bool, shmSize string) error {
	if err := unix.Mount("tmpfs", dev, "tmpfs", unix.MS_NOSUID|unix.MS_NOEXEC, "mode=755,size=1m"); err != nil {
		return fmt.Errorf("mount /dev: %w", err)
	}
	for _, d := range devices {
		p := filepath.Join(dev, d.name)
		if userns {
			if err := os.WriteFile(p, nil, 0o666); err != nil {
				return err
			}
			if err := unix.Mount("/dev/"+d.name, p, "", unix.MS_BIND, ""); err != nil {
				return fmt.Errorf("bind /dev/%s: %w", d.name, err)
			}
			continue
		}
		if err := unix.Mknod(p, unix.S_IFCHR|0o666, int(unix.Mkdev(d.major, d.minor))); err != nil {
			return fmt.Errorf("mknod /dev/%s: %w", d.name, err)
		}
		if err := os.Chmod(p, 0o666); err != nil {
			return err
		}
	}
	// A devpts instance of the sandbox's own, so ptys opened inside are
	// neither visible to nor numbered with the host's.
	pts := filepath.Join(dev, "pts")
	if err := os.Mkdir(pts, 0o755); err != nil {
		return err
	}
	ptsOpts := "newinstance,ptmxmode=0666,mode=0620"
	if ttyGroup {
		ptsOpts += ",gid=5" // tty; not mapped in a rootless user namespace
	}
	if err := unix.Mount("devpts", pts, "devpts", unix.MS_NOSUID|unix.MS_NOEXEC, ptsOpts); err != nil {
		return fmt.Errorf("mount /dev/pts: %w", err)
	}
	shm := filepath.Join(dev, "shm")
	if err := os.Mkdir(shm, 0o1777); err != nil {
		return err
	}
	if err := unix.Mount("shm", shm, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=1777,"+shmSize); err != nil {
		return fmt.Errorf("mount /dev/shm: %w", err)
	}
	for name, target := range map[string]string{
		"ptmx":   "pts/ptmx",
		"fd":     "/proc/self/fd",
		"stdin":  "/proc/self/fd/0",
		"stdout": "/proc/self/fd/1",
		"stderr": "/proc/self/fd/2",
	} {
		if err := os.Symlink(target, filepath.Join(dev, name)); err != nil {
			return err
		}
	}
	return nil
}

// mountProc mounts a /proc of the sandbox's PID namespace. Parts of /proc
// act on the whole machine rather than the namespace (sysctls, sysrq, the
// kernel's memory and log), so they are made read-only or hidden behind
// /dev/null.
func mountProc(proc, devNull string) error {
	const procFlags = unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC
	if err := unix.Mount("proc", proc, "proc", procFlags, ""); err != nil {
		return fmt.Errorf("mount /proc: %w", err)
	}
	for _, name := range []string{"sys", "sysrq-trigger", "irq", "bus", "fs"} {
		p := filepath.Join(proc, name)
		if _, err := os.Lstat(p); err != nil {
			continue
		}
		if err := unix.Mount(p, p, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind /proc/%s: %w", name, err)
		}
		if err := unix.Mount("", p, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|procFlags, ""); err != nil {
			return fmt.Errorf("make /proc/%s read-only: %w", name, err)
		}
	}
	for _, name := range []string{"kcore", "kmsg", "timer_list", "sched_debug", "latency_stats", "keys", "key-users"} {
		p := filepath.Join(proc, name)
		if fi, err := os.Lstat(p); err != nil || fi.IsDir() {
			continue
		}
		if err := unix.Mount(devNull, p, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("mask /proc/%s: %w", name, err)
		}
	}
	return nil
}

// pivotInto makes root the root of the mount namespace and detaches the old
// root, so no path leads back to the host's filesystem. Stacking the old
// root on the new one (pivot_root(".", ".")) avoids needing a directory for
// it inside the sandbox's filesystem.
func pivotInto(root string) error {
	if err := unix.Chdir(root); err != nil {
		return fmt.Errorf("chdir to new root: %w", err)
	}
	if err := unix.PivotRoot(".", "."); err != nil {
		return fmt.Errorf("pivot_root: %w", err)
	}
	if err := unix.Unmount(".", unix.MNT_DETACH); err != nil {
		return fmt.Errorf("detach old root: %w", err)
	}
	if err := unix.Chdir("/"); err != nil {
		return fmt.Errorf("chdir /: %w", err)
	}
	return nil
}
