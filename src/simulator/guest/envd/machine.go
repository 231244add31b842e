package envd

import "slices"

// Machine describes a guest that owns its machine, as real envd owns its
// VM: the isolated simulator's guest program serves "/" inside a sandbox's
// own namespaces, and those namespaces, not the file API, keep the host out
// of reach. With Config.Machine set:
//
//   - paths name themselves: an absolute path is that path under Root (so
//     /etc/os-release is the sandbox's), and a relative one, "" or "~/…"
//     resolves against the user's home, /home/<User> or /root, as in envd;
//   - the file API reaches all of Root and follows symlinks as the system
//     does (see tree);
//   - commands start in the user's real home with HOME naming it and PATH
//     set to Path, and run with the user's Account, which also owns the
//     files and directories the file API creates for that user, so the
//     user's commands can change them afterwards.
type Machine struct {
	// Accounts maps user names to the ids they run as. A user without an
	// entry (root, or every user where the guest cannot switch ids) keeps
	// the guest's own.
	Accounts map[string]Account
	// Path is the PATH commands start with; empty keeps the guest's own.
	Path string
}

// Account is a user's ids on the machine.
type Account struct {
	UID, GID uint32
	// Groups are the supplementary groups; nil means none.
	Groups []uint32
}

// clone copies m deeply, so a caller changing its Machine later cannot
// change a running guest.
func (m *Machine) clone() *Machine {
	if m == nil {
		return nil
	}
	c := &Machine{Path: m.Path, Accounts: make(map[string]Account, len(m.Accounts))}
	for name, a := range m.Accounts {
		a.Groups = slices.Clone(a.Groups)
		c.Accounts[name] = a
	}
	return c
}
