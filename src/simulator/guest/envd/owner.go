package envd

import (
	"fmt"
	"path/filepath"
	"syscall"
)

// account is who user is on a machine the guest owns, when the guest was
// told (Machine.Accounts); ok is false otherwise, and user's processes and
// files then keep the guest's own ids.
func (h *home) account(user string) (Account, bool) {
	if !h.machine {
		return Account{}, false
	}
	a, ok := h.accounts[user]
	return a, ok
}

// credential is what user's processes run with; nil keeps the guest's ids.
func (h *home) credential(user string) *syscall.Credential {
	a, ok := h.account(user)
	if !ok {
		return nil
	}
	return &syscall.Credential{Uid: a.UID, Gid: a.GID, Groups: append([]uint32{}, a.Groups...)}
}

// chown gives the entry rel (not a symlink's target) to user, as envd does
// for what it writes on a user's behalf: otherwise the user's own commands
// could not change a file they uploaded.
func (h *home) chown(user, rel string) error {
	a, ok := h.account(user)
	if !ok {
		return nil
	}
	if err := h.root.Lchown(rel, int(a.UID), int(a.GID)); err != nil {
		return fmt.Errorf("giving %q to %s: %w", place{rel: rel, base: "/"}.guest(), user, err)
	}
	return nil
}

// mkdirAll creates the directory rel with its missing parents, giving each
// directory it created (and only those) to user.
func (h *home) mkdirAll(user, rel string) error {
	var created []string
	if _, ok := h.account(user); ok {
		for p := rel; p != "." && p != string(filepath.Separator); p = filepath.Dir(p) {
			if _, err := h.root.Lstat(p); err == nil {
				break
			}
			created = append(created, p)
		}
	}
	if err := h.root.MkdirAll(rel, 0o755); err != nil {
		return err
	}
	// Parents first, so a failure leaves the outermost ones given away.
	for i := len(created) - 1; i >= 0; i-- {
		if err := h.chown(user, created[i]); err != nil {
			return err
		}
	}
	return nil
}
