package machine

import (
	"context"
	"strings"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/envd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// sandboxUser is the sandbox's default user (isolate.Spec.User) as envd
// needs it.
type sandboxUser struct {
	name    string
	path    string
	account *envd.Account // nil: the ids cannot be switched (rootless)
}

// currentUser reads the sandbox's user off the command isolate.Command
// would build, the one place isolate exposes it: its environment names the
// user and PATH, and its credential, when set, carries the ids. Reusing
// them keeps envd's commands exactly what isolate.Command starts.
func currentUser() sandboxUser {
	cmd := isolate.Command(context.Background(), "/bin/true")
	u := sandboxUser{name: envd.DefaultUser}
	for _, kv := range cmd.Env {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case "USER":
			u.name = v
		case "PATH":
			u.path = v
		}
	}
	if a := cmd.SysProcAttr; a != nil && a.Credential != nil {
		c := a.Credential
		u.account = &envd.Account{UID: c.Uid, GID: c.Gid, Groups: append([]uint32(nil), c.Groups...)}
	}
	return u
}
