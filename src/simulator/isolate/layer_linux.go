package isolate

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SaveLayer copies the sandbox's writable layer to dir (created; it must not
// exist or be empty), for fork and checkpoint: Spec.From = dir starts a new
// sandbox with the same files.
//
// Kept: every file the sandbox created, changed or deleted relative to its
// root filesystem (contents, owners, modes, times, extended attributes,
// hard links, and the overlay's whiteouts and opaque directories, so
// deletions stay deleted). Not kept: processes, memory, open files and
// sockets, and the tmpfs mounts /tmp and /dev/shm.
//
// While copying, the sandbox is frozen (when it has a freezer), so the copy
// is one point in time rather than a mix of before and after a write.
func (s *Sandbox) SaveLayer(dir string) error {
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	s.freezeMu.Lock()
	defer s.freezeMu.Unlock()
	if s.cg != nil && s.cg.freezer != "" && !s.frozen {
		if err := s.cg.setFrozen(true); err != nil {
			return err
		}
		defer func() { _ = s.cg.setFrozen(false) }()
	}
	return copyLayer(s.upper, dir)
}

// copyLayer copies the tree src into dst, which either does not exist (it is
// created private, mode 0700) or is an empty directory (its mode is kept).
func copyLayer(src, dst string) error {
	if err := os.Mkdir(dst, 0o700); err != nil {
		if !errors.Is(err, os.ErrExist) {
			return err
		}
		ents, err := os.ReadDir(dst)
		if err != nil {
			return err
		}
		if len(ents) > 0 {
			return fmt.Errorf("isolate: %s is not empty", dst)
		}
	}
	links := map[[2]uint64]string{} // (dev, ino) → first copy, for hard links
	type dirTimes struct {
		path string
		st   *unix.Stat_t
	}
	var dirs []dirTimes
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		var st unix.Stat_t
		if err := unix.Lstat(p, &st); err != nil {
			return err
		}
		mode := st.Mode & 0o7777
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFDIR:
			if rel != "." {
				if err := os.Mkdir(out, 0o700); err != nil {
					return err
				}
			}
			dirs = append(dirs, dirTimes{out, &st})
		case unix.S_IFREG:
			key := [2]uint64{st.Dev, st.Ino}
			if first, ok := links[key]; ok && st.Nlink > 1 {
				return os.Link(first, out)
			}
			if err := copyFile(p, out); err != nil {
				return err
			}
			if st.Nlink > 1 {
				links[key] = out
			}
		case unix.S_IFLNK:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			if err := os.Symlink(target, out); err != nil {
				return err
			}
		case unix.S_IFCHR, unix.S_IFBLK, unix.S_IFIFO, unix.S_IFSOCK:
			// Character device 0:0 is how overlayfs records a deletion.
			if err := unix.Mknod(out, st.Mode, int(st.Rdev)); err != nil {
				return fmt.Errorf("isolate: copy %s: %w", rel, err)
			}
		default:
			return fmt.Errorf("isolate: copy %s: unsupported file type %o", rel, st.Mode&unix.S_IFMT)
		}
		if rel == "." {
			// The copy's top keeps its own private mode: a layer may hold
			// setuid files made by the sandbox's root.
			return copyXattrs(p, out)
		}
		return copyMeta(p, out, &st, mode)
	})
	if err != nil {
		return err
	}
	// Directory times last, since filling a directory changes its mtime.
	for i := len(dirs) - 1; i >= 1; i-- { // dirs[0] is the top
		d := dirs[i]
		ts := []unix.Timespec{d.st.Atim, d.st.Mtim}
		if err := unix.UtimesNanoAt(unix.AT_FDCWD, d.path, ts, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	// io.Copy between files uses copy_file_range, which shares extents
	// where the filesystem can.
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// copyMeta copies owner, extended attributes (overlayfs keeps opaque-dir
// and redirect marks there), mode and times. Owner first: chown clears
// setuid bits, so the mode is set after it.
func copyMeta(src, dst string, st *unix.Stat_t, mode uint32) error {
	if err := unix.Lchown(dst, int(st.Uid), int(st.Gid)); err != nil {
		return fmt.Errorf("isolate: chown %s: %w", dst, err)
	}
	if err := copyXattrs(src, dst); err != nil {
		return err
	}
	isLink := st.Mode&unix.S_IFMT == unix.S_IFLNK
	if !isLink {
		if err := unix.Chmod(dst, mode); err != nil {
			return err
		}
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return nil // set after the walk
	}
	ts := []unix.Timespec{st.Atim, st.Mtim}
	return unix.UtimesNanoAt(unix.AT_FDCWD, dst, ts, unix.AT_SYMLINK_NOFOLLOW)
}

func copyXattrs(src, dst string) error {
	size, err := unix.Llistxattr(src, nil)
	if err != nil || size == 0 {
		if errors.Is(err, unix.ENOTSUP) {
			err = nil
		}
		return err
	}
	buf := make([]byte, size)
	size, err = unix.Llistxattr(src, buf)
	if err != nil {
		return err
	}
	for _, name := range splitNul(buf[:size]) {
		vsize, err := unix.Lgetxattr(src, name, nil)
		if err != nil {
			return err
		}
		val := make([]byte, vsize)
		if vsize > 0 {
			if vsize, err = unix.Lgetxattr(src, name, val); err != nil {
				return err
			}
		}
		if err := unix.Lsetxattr(dst, name, val[:vsize], 0); err != nil {
			return fmt.Errorf("isolate: copy xattr %s of %s: %w", name, src, err)
		}
	}
	return nil
}

func splitNul(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != 0 {
			i++
		}
		if i > 0 {
			out = append(out, string(b[:i]))
		}
		if i == len(b) {
			break
		}
		b = b[i+1:]
	}
	return out
}
