package isolate

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// defaultPath is the PATH of commands inside (Debian's default for login
// shells, plus sbin for root's tools).
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// sandboxUser is the default user of a sandbox, resolved from the root
// filesystem's /etc/passwd and /etc/group (not the host's).
type sandboxUser struct {
	Name   string
	UID    uint32
	GID    uint32
	Groups []uint32
	Home   string
	Shell  string
	// Switch is false when the user's ids cannot be taken inside (a user
	// namespace mapping only the caller): commands then keep the program's
	// ids and get only the user's environment.
	Switch bool
}

// lookupUser resolves name in root/etc/passwd; "" is root.
func lookupUser(root, name string, rootless bool) (*sandboxUser, error) {
	if name == "" {
		name = "root"
	}
	u := &sandboxUser{Name: name}
	found := false
	err := scanColonFile(filepath.Join(root, "etc", "passwd"), func(f []string) bool {
		if len(f) < 7 || f[0] != name {
			return true
		}
		uid, err1 := strconv.ParseUint(f[2], 10, 32)
		gid, err2 := strconv.ParseUint(f[3], 10, 32)
		if err1 != nil || err2 != nil {
			return true
		}
		u.UID, u.GID, u.Home, u.Shell = uint32(uid), uint32(gid), f[5], f[6]
		found = true
		return false
	})
	if err != nil && !(errors.Is(err, os.ErrNotExist) && name == "root") {
		return nil, fmt.Errorf("isolate: user %q: %w", name, err)
	}
	if !found {
		if name != "root" {
			return nil, fmt.Errorf("isolate: user %q is not in the root filesystem's /etc/passwd", name)
		}
		u.Home, u.Shell = "/root", "/bin/sh"
	}
	// Supplementary groups; a missing /etc/group just means none.
	_ = scanColonFile(filepath.Join(root, "etc", "group"), func(f []string) bool {
		if len(f) < 4 {
			return true
		}
		for _, m := range strings.Split(f[3], ",") {
			if m == name {
				if gid, err := strconv.ParseUint(f[2], 10, 32); err == nil && uint32(gid) != u.GID {
					u.Groups = append(u.Groups, uint32(gid))
				}
			}
		}
		return true
	})
	u.Switch = !rootless
	return u, nil
}

func scanColonFile(path string, fn func(fields []string) bool) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if !fn(strings.Split(line, ":")) {
			return nil
		}
	}
	return sc.Err()
}

// ensureHome creates the user's home (owned by the user) when the root
// filesystem lacks it, so commands always start in a writable home. It is
// created in the writable layer.
func ensureHome(root string, u *sandboxUser) error {
	if u.Home == "" || !filepath.IsAbs(u.Home) {
		return nil
	}
	p := filepath.Join(root, u.Home)
	if _, err := os.Lstat(p); err == nil || !errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return fmt.Errorf("isolate: create home %s: %w", u.Home, err)
	}
	if u.Switch {
		return os.Chown(p, int(u.UID), int(u.GID))
	}
	return nil
}

// Command is exec.CommandContext for the sandbox's default user (Spec.User):
// it runs as that user's uid, gid and groups, in its home, with HOME, USER,
// LOGNAME, SHELL and PATH set and nothing else of the program's environment.
// Callers may append to Env and change Dir. Outside a sandbox's program it
// is a plain exec.CommandContext.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	u := currentUser
	if u == nil {
		return cmd
	}
	cmd.Env = []string{
		"HOME=" + u.Home,
		"USER=" + u.Name,
		"LOGNAME=" + u.Name,
		"SHELL=" + u.Shell,
		"PATH=" + defaultPath,
	}
	if fi, err := os.Stat(u.Home); err == nil && fi.IsDir() {
		cmd.Dir = u.Home
	} else {
		cmd.Dir = "/"
	}
	if u.Switch {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{
			Uid: u.UID, Gid: u.GID, Groups: append([]uint32(nil), u.Groups...),
		}}
	}
	return cmd
}
