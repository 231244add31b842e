package envd

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
)

// errOutsideHome is returned for a path that, read lexically, names
// something outside the sandbox's home (via "..", or an absolute path
// elsewhere).
var errOutsideHome = errors.New("path is outside the sandbox home")

// errBadPath is returned for a path no file could have: a NUL byte, or
// longer than Linux allows. Such a path is the client's mistake; left to
// the system call it would surface as an unclassified EINVAL or
// ENAMETOOLONG.
var errBadPath = errors.New("invalid path")

// Linux's bounds on a path: PATH_MAX bytes in all (with the NUL), and
// NAME_MAX bytes in one name.
const (
	maxPathBytes = 4096
	maxNameBytes = 255
)

// checkPath refuses a path no file could have.
func checkPath(p string) error {
	if strings.IndexByte(p, 0) >= 0 {
		return fmt.Errorf("%w: it contains a NUL byte", errBadPath)
	}
	if len(p) >= maxPathBytes {
		return fmt.Errorf("%w: %d bytes long, over the %d allowed", errBadPath, len(p), maxPathBytes-1)
	}
	for name := range strings.SplitSeq(p, "/") {
		if len(name) > maxNameBytes {
			return fmt.Errorf("%w: a name of %d bytes, over the %d allowed", errBadPath, len(name), maxNameBytes)
		}
	}
	return nil
}

// quotePath quotes a client's path for an error message, shortened so
// that a huge path is not echoed back whole.
func quotePath(p string) string {
	const keep = 128
	if len(p) <= keep {
		return fmt.Sprintf("%q", p)
	}
	return fmt.Sprintf("%q… (%d bytes)", p[:keep], len(p))
}

// rootUser is the superuser; its guest home is /root.
const rootUser = "root"

// home is the sandbox's scratch directory, the only part of the host the
// file API reaches. Clients see it under guest-side names instead:
// /home/<user> for the default user and /root for root both name it, the
// way an e2b template's home directories would look from inside a VM.
//
// Every file operation goes through an os.Root, which refuses ".." and
// symlinks that lead out of the directory at the moment of the system call,
// so a symlink planted by a guest command cannot be used to read or write
// host files.
//
// A guest that owns its machine (Config.Machine) has no scratch directory:
// dir is the machine's root, names are the machine's own paths, and root is
// an osTree (see tree).
type home struct {
	dir       string // canonical absolute host path of the scratch directory
	user      string // the default user, whose home is /home/<user>
	root      tree
	machine   bool
	accounts  map[string]Account // with machine: whose ids a user's files get
	closeOnce sync.Once
	closeErr  error
}

// place is a resolved guest path: a name relative to the scratch directory
// (the form os.Root takes) and the guest home it is reported under, so a
// caller who named /root/x hears back /root/x, not /home/user/x.
type place struct {
	rel  string // relative to home.dir, cleaned; "." is the home itself
	base string // the guest home directory, e.g. /home/user
}

// guest is the absolute guest-side path of p.
func (p place) guest() string {
	return path.Join(p.base, filepath.ToSlash(p.rel))
}

// child is the entry name inside the directory p.
func (p place) child(name string) place {
	return place{rel: filepath.Join(p.rel, name), base: p.base}
}

func openHome(dir, user string, machine *Machine) (*home, error) {
	if machine != nil {
		return &home{dir: dir, user: user, root: osTree(dir), machine: true, accounts: machine.Accounts}, nil
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("envd: opening root %q: %w", dir, err)
	}
	return &home{dir: dir, user: user, root: root}, nil
}

func (h *home) close() error {
	h.closeOnce.Do(func() { h.closeErr = h.root.Close() })
	return h.closeErr
}

// guestHome is user's home directory as the guest names it.
func guestHome(user string) string {
	if user == rootUser {
		return "/root"
	}
	return "/home/" + user
}

// resolve maps a path a request made as user to a place in the home.
// Empty and "~" mean the user's home; relative paths and "~/x" are relative
// to it. An absolute path must lie under one of the guest homes (/home/<the
// default user> or /root, which share the scratch directory: the simulator
// models no permissions between users) or, so that a path a command printed
// still works, under the scratch directory's host path; anything else is
// outside. The sandbox has no /tmp or other system directories of its own,
// and naming the host's would defeat the confinement.
func (h *home) resolve(user, p string) (place, error) {
	if err := checkPath(p); err != nil {
		return place{}, err
	}
	own := guestHome(user)
	if h.machine {
		return resolveOnMachine(own, p), nil
	}
	switch {
	case p == "" || p == "~":
		return place{rel: ".", base: own}, nil
	case strings.HasPrefix(p, "~/"):
		p = p[2:]
	}
	if !strings.HasPrefix(p, "/") {
		rel := filepath.Clean(p)
		if rel == ".." || strings.HasPrefix(rel, "../") {
			return place{}, errOutsideHome
		}
		return place{rel: rel, base: own}, nil
	}
	clean := path.Clean(p)
	for _, prefix := range []struct{ dir, base string }{
		{guestHome(h.user), guestHome(h.user)},
		{"/root", "/root"},
		{h.dir, own},
	} {
		if rest, ok := under(clean, prefix.dir); ok {
			return place{rel: rest, base: prefix.base}, nil
		}
	}
	return place{}, errOutsideHome
}

// resolveOnMachine maps p to a place on a machine the guest owns: paths
// name themselves, and "", "~", "~/x" and relative paths are taken from
// own, the user's home, as envd does. ".." cannot climb above "/", so
// every name stays under the machine's root.
func resolveOnMachine(own, p string) place {
	switch {
	case p == "" || p == "~":
		p = own
	case strings.HasPrefix(p, "~/"):
		p = own + "/" + p[2:]
	case !strings.HasPrefix(p, "/"):
		p = own + "/" + p
	}
	clean := path.Clean(p)
	if clean == "/" {
		return place{rel: ".", base: "/"}
	}
	return place{rel: filepath.FromSlash(clean[1:]), base: "/"}
}

// under reports whether the clean absolute path p is dir or lies below it,
// and returns its name relative to dir.
func under(p, dir string) (string, bool) {
	if p == dir {
		return ".", true
	}
	if rest, ok := strings.CutPrefix(p, dir+"/"); ok {
		return filepath.FromSlash(rest), true
	}
	return "", false
}

// host is the host path of a home-relative name, for what cannot go through
// the os.Root: a command's working directory and inotify watches.
func (h *home) host(rel string) string {
	return filepath.Join(h.dir, rel)
}

// isEscape reports whether err is os.Root refusing a path that leaves the
// root through a symlink. The sentinel is unexported, so its text is
// matched; should it ever change, such errors fall through to 500, which
// still refuses the request.
func isEscape(err error) bool {
	return err != nil && strings.Contains(err.Error(), "path escapes from parent")
}
