package node

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// copyTreeIfExists copies the directory tree at src to dst (a sandbox's
// "disk" at a fork or checkpoint). A missing src copies nothing: the
// guest never touched its disk. Symlinks are recreated, not followed, so a
// guest cannot make the copy read outside its own tree.
func copyTreeIfExists(src, dst string) error {
	if _, err := os.Lstat(src); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(target, info.Mode().Perm()|0o700)
		case d.Type()&fs.ModeSymlink != 0:
			link, err := os.Readlink(path)
			if err != nil {
				return err
			}
			return os.Symlink(link, target)
		case d.Type().IsRegular():
			return copyFile(path, target, info.Mode().Perm())
		}
		return nil // sockets, fifos: not disk state worth cloning
	})
}

func copyFile(src, dst string, perm fs.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return fmt.Errorf("copy %s: %w", filepath.Base(src), err)
	}
	return out.Close()
}

// ScratchDir returns the scratch directory of a live sandbox (it may not
// exist yet: it is created when the first guest starts).
func (n *Node) ScratchDir(id string) (string, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.sandboxes[id] == nil {
		return "", false
	}
	return filepath.Join(n.scratch, id), true
}
