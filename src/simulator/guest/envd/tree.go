package envd

import (
	"io/fs"
	"os"
	"path/filepath"
)

// tree is the file operations the guest performs, on names relative to its
// root. Normally that is an *os.Root, which keeps every operation inside the
// scratch directory even through symlinks a command planted. A guest that
// owns its machine (Config.Machine) uses an osTree instead: there the
// sandbox's namespaces keep the host out of reach, and the system's own
// absolute symlinks (/etc/localtime, /usr/bin/awk → /etc/alternatives/awk)
// must resolve as on any Linux system, which os.Root refuses.
type tree interface {
	Open(name string) (*os.File, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Stat(name string) (fs.FileInfo, error)
	Lstat(name string) (fs.FileInfo, error)
	MkdirAll(name string, perm fs.FileMode) error
	Rename(oldname, newname string) error
	Remove(name string) error
	RemoveAll(name string) error
	Readlink(name string) (string, error)
	Lchown(name string, uid, gid int) error
	Close() error
}

var (
	_ tree = (*os.Root)(nil)
	_ tree = osTree("")
)

// osTree performs the operations with the plain os functions on the names
// joined to its directory, following symlinks wherever they lead.
type osTree string

func (t osTree) path(name string) string { return filepath.Join(string(t), name) }

func (t osTree) Open(name string) (*os.File, error) { return os.Open(t.path(name)) }

func (t osTree) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(t.path(name), flag, perm)
}

func (t osTree) Stat(name string) (fs.FileInfo, error)  { return os.Stat(t.path(name)) }
func (t osTree) Lstat(name string) (fs.FileInfo, error) { return os.Lstat(t.path(name)) }

func (t osTree) MkdirAll(name string, perm fs.FileMode) error {
	return os.MkdirAll(t.path(name), perm)
}

func (t osTree) Rename(oldname, newname string) error {
	return os.Rename(t.path(oldname), t.path(newname))
}

func (t osTree) Remove(name string) error               { return os.Remove(t.path(name)) }
func (t osTree) RemoveAll(name string) error            { return os.RemoveAll(t.path(name)) }
func (t osTree) Readlink(name string) (string, error)   { return os.Readlink(t.path(name)) }
func (t osTree) Lchown(name string, uid, gid int) error { return os.Lchown(t.path(name), uid, gid) }

// Close has nothing to release: an osTree holds no descriptor.
func (t osTree) Close() error { return nil }
