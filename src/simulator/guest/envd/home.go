package envd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// errOutsideHome is returned for a path that, read lexically, names
// something outside the sandbox's home (via "..", or an absolute path
// elsewhere on the host).
var errOutsideHome = errors.New("path is outside the sandbox home")

// home is the sandbox's scratch directory, the only part of the host the
// file API reaches. Every file operation goes through an os.Root, which
// refuses ".." and symlinks that lead out of the directory at the moment of
// the system call, so a symlink planted by a guest command cannot be used to
// read or write host files.
type home struct {
	dir       string // canonical absolute path, as reported to clients
	root      *os.Root
	closeOnce sync.Once
	closeErr  error
}

func openHome(dir string) (*home, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("envd: opening root %q: %w", dir, err)
	}
	return &home{dir: dir, root: root}, nil
}

func (h *home) close() error {
	h.closeOnce.Do(func() { h.closeErr = h.root.Close() })
	return h.closeErr
}

// rel maps a guest path to a name relative to home, the form os.Root takes.
// Empty and "~" mean home itself; relative paths and "~/x" are relative to
// it; absolute paths must lie inside it.
func (h *home) rel(p string) (string, error) {
	switch {
	case p == "" || p == "~":
		return ".", nil
	case strings.HasPrefix(p, "~/"):
		p = p[2:]
	}
	var rel string
	if filepath.IsAbs(p) {
		r, err := filepath.Rel(h.dir, filepath.Clean(p))
		if err != nil {
			return "", errOutsideHome
		}
		rel = r
	} else {
		rel = filepath.Clean(p)
	}
	if rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", errOutsideHome
	}
	return rel, nil
}

// abs is the absolute guest path of a home-relative name.
func (h *home) abs(rel string) string {
	return filepath.Join(h.dir, rel)
}

// isEscape reports whether err is os.Root refusing a path that leaves the
// root through a symlink. The sentinel is unexported, so its text is
// matched; should it ever change, such errors fall through to 500, which
// still refuses the request.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
