package isolate

import (
	"errors"
	"fmt"
	"os"
	"path"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// ownMounts are the sandbox's own mount points, which a Mount may neither
// replace nor sit under.
var ownMounts = []string{"/proc", "/dev", "/tmp"}

// checkMounts validates Spec.Mounts on the host, before anything starts.
func checkMounts(mounts []Mount) error {
	targets := map[string]bool{}
	for _, m := range mounts {
		if !path.IsAbs(m.Source) {
			return fmt.Errorf("isolate: mount source %q is not absolute", m.Source)
		}
		if fi, err := os.Stat(m.Source); err != nil || !fi.IsDir() {
			return fmt.Errorf("isolate: mount source %q is not a directory", m.Source)
		}
		t := m.Target
		if !path.IsAbs(t) || path.Clean(t) != t || t == "/" || strings.ContainsRune(t, 0) {
			return fmt.Errorf("isolate: mount target %q must be an absolute, clean path other than /", t)
		}
		for _, own := range ownMounts {
			if t == own || strings.HasPrefix(t, own+"/") {
				return fmt.Errorf("isolate: mount target %q is under the sandbox's own %s", t, own)
			}
		}
		if targets[t] {
			return fmt.Errorf("isolate: two mounts on %q", t)
		}
		targets[t] = true
	}
	return nil
}

// bindMounts binds each mount's source onto its target under root, in the
// init's private mount namespace. The target path is walked one component
// at a time without following symlinks: the writable layer may come from a
// template or checkpoint another caller shaped, and a symlink there
// resolved now (before pivot_root) would point at the host's filesystem.
func bindMounts(root string, mounts []Mount) error {
	for _, m := range mounts {
		if err := bindMount(root, m); err != nil {
			return fmt.Errorf("mount %s on %s: %w", m.Source, m.Target, err)
		}
	}
	return nil
}

func bindMount(root string, m Mount) error {
	fd, err := openTarget(root, m.Target)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	// The descriptor's /proc path names exactly the directory walked to,
	// whatever the names on the way point to by now.
	target := "/proc/self/fd/" + strconv.Itoa(fd)
	if err := unix.Mount(m.Source, target, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind: %w", err)
	}
	// The descriptor still names the directory under the bind; a walk to
	// the same path now ends on the bind's root, which the remount needs.
	mfd, err := openTarget(root, m.Target)
	if err != nil {
		return err
	}
	defer unix.Close(mfd)
	target = "/proc/self/fd/" + strconv.Itoa(mfd)
	// A bind takes no flags of its own; they are set by remounting it. A
	// dataset is data: never setuid programs or device nodes. A flag the
	// source mount already has (noexec, and in a user namespace the locked
	// ones) must be kept, or the remount is refused.
	flags := uintptr(unix.MS_BIND | unix.MS_REMOUNT | unix.MS_NOSUID | unix.MS_NODEV)
	var st unix.Statfs_t
	if err := unix.Statfs(m.Source, &st); err == nil {
		flags |= keptFlags(st.Flags)
	}
	if m.ReadOnly {
		flags |= unix.MS_RDONLY
	}
	if err := unix.Mount("", target, "", flags, ""); err != nil {
		return fmt.Errorf("remount (read-only %t): %w", m.ReadOnly, err)
	}
	return nil
}

// keptFlags maps a source's statfs flags to the mount flags a remount of a
// bind of it must keep.
func keptFlags(f int64) uintptr {
	var out uintptr
	for _, p := range []struct {
		st    int64
		mount uintptr
	}{
		{unix.ST_NOEXEC, unix.MS_NOEXEC},
		{unix.ST_RDONLY, unix.MS_RDONLY},
		{unix.ST_NOATIME, unix.MS_NOATIME},
		{unix.ST_NODIRATIME, unix.MS_NODIRATIME},
		{unix.ST_RELATIME, unix.MS_RELATIME},
	} {
		if f&p.st != 0 {
			out |= p.mount
		}
	}
	return out
}

// openTarget opens (as O_PATH) the directory target under root, creating
// missing components (mode 0755) and refusing any component that is a
// symlink or not a directory.
func openTarget(root, target string) (int, error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, err
	}
	for _, name := range strings.Split(strings.TrimPrefix(target, "/"), "/") {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return -1, fmt.Errorf("create %s: %w", name, err)
		}
		next, err := unix.Openat(fd, name, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return -1, fmt.Errorf("open %s (a symlink or not a directory?): %w", name, err)
		}
		fd = next
	}
	return fd, nil
}
