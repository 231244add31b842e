package node

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Routes a claim answer names for how its guest reaches the network.
const (
	netRouteNone   = "none"
	netRouteRelay  = "relay"
	netRouteDirect = "direct"
)

// claimOptions are what a claim (or a checkpoint branch, or a fork child by
// inheritance) chose beyond its key and labels. They are fixed at the claim
// except onExpire, which a renew may switch, and env, which the env verbs
// replace; both are guarded by Node.mu.
type claimOptions struct {
	onExpire string // "" or sandboxd.ExpireDestroy: destroy at the deadline
	noEgress bool   // "egress": false
	env      map[string]sandboxd.EnvEntry
}

// archiveState is where a claim stands in the archive lifecycle. An
// archived sandbox is also hibernated: its guests are stopped and its
// scratch state is kept, which stands for the checkpoint store's copy.
type archiveState struct {
	archived bool
	// retainUntil is when an archived sandbox is deleted; zero keeps it
	// until it is released (Config.ArchiveDeleteAfter 0).
	retainUntil time.Time
}

func archives(o claimOptions) bool { return o.onExpire == sandboxd.ExpireArchive }

// checkOnExpire refuses an expiry action the contract does not name, and
// archive for a sandbox of key, which could never be hibernated at its
// deadline: the refusal is the one a hibernate of such a sandbox gets.
func checkOnExpire(onExpire string, key sandbox.PoolKey, volumes []sandboxd.VolumeMount) *apiError {
	if !sandboxd.ValidOnExpire(onExpire) {
		return errorf(http.StatusBadRequest, "unknown on_expire %.32q (want %q or %q)", onExpire, sandboxd.ExpireDestroy, sandboxd.ExpireArchive)
	}
	if onExpire == sandboxd.ExpireArchive {
		return staysLive(&claimed{key: key, volumes: volumes}, "hibernate")
	}
	return nil
}

// checkClaimOptions checks a claim body's on_expire and decodes its env
// (as sent) into req, before any redirect: a body refused here is refused
// everywhere.
func checkClaimOptions(req *sandboxd.ClaimRequest, rawEnv json.RawMessage) *apiError {
	if aerr := checkOnExpire(req.OnExpire, req.Key(), req.Volumes); aerr != nil {
		return aerr
	}
	env, aerr := decodeEnv(rawEnv)
	if aerr != nil {
		return aerr
	}
	req.Env = env
	return nil
}

// netRoute says how a claim's guest reaches the network. The simulator's
// egress lane is an unlocked NIC (EgressAttachment filters nothing), so
// it is "direct" even for "egress": false, which closes the doors and not
// a NIC. Every other lane has no egress policy here: no doors are bound,
// so nothing is relayed.
func netRoute(key sandbox.PoolKey, _ claimOptions) string {
	if key.Net == netEgress {
		return netRouteDirect
	}
	return netRouteNone
}

// refuseArchived refuses the verbs that snapshot a sandbox (fork,
// checkpoint, promote) while it is archived: its state is off the node
// until a call that reaches the guest restores it.
func refuseArchived(sb *claimed, verb string) *apiError {
	if sb.archived {
		return errorf(http.StatusConflict, "%s: the sandbox is archived; wake it first", verb)
	}
	return nil
}

// resumeLocked brings a hibernated or archived sandbox back to running. An
// archived one starts a fresh lease of the length last granted (the claim's
// or the last renew's), so its next expiry archives it again.
func (n *Node) resumeLocked(sb *claimed) {
	if sb.archived {
		sb.archived = false
		sb.retainUntil = time.Time{}
		sb.deadline = n.cfg.Clock.Now().Add(sb.lease)
		n.stats.unarchives.Add(1)
	}
	n.wakeLocked(sb)
}

// expireLocked handles one sandbox whose deadline passed at now. It
// returns true when the sandbox is to be destroyed (the caller removes it),
// and whether its guests are to be stopped now (a running sandbox being
// archived).
func (n *Node) expireLocked(sb *claimed, now time.Time) (destroy, stop bool) {
	switch {
	case sb.archived:
		if sb.retainUntil.IsZero() || now.Before(sb.retainUntil) {
			return false, false
		}
		n.stats.archiveDeletes.Add(1)
		return true, false
	// A failed sandbox has no VM to hibernate: it ends as a destroy.
	case sb.failed != "":
		return true, false
	// A removed tenant's claim cannot extend, so it is never archived.
	case archives(sb.claimOptions) && staysLive(sb, "archive") == nil && !n.tenantRemovedLocked(sb):
		stop = !sb.hibernated
		if stop {
			n.hibernateLocked(sb)
		}
		sb.archived = true
		if n.cfg.ArchiveDeleteAfter > 0 {
			// While stored, the retention window is the row's deadline.
			sb.retainUntil = now.Add(n.cfg.ArchiveDeleteAfter)
			sb.deadline = sb.retainUntil
		}
		n.stats.archives.Add(1)
		return false, stop
	}
	return true, false
}

// leaseEnded reports whether sb's deadline has passed and the reaper has
// something to do about it: an archived sandbox kept forever never ends.
func leaseEnded(sb *claimed, now time.Time) bool {
	if sb.archived {
		return !sb.retainUntil.IsZero() && !now.Before(sb.retainUntil)
	}
	return !now.Before(sb.deadline)
}

// claimOptionsOf takes a checked claim request's options.
func claimOptionsOf(req sandboxd.ClaimRequest) claimOptions {
	return claimOptions{
		onExpire: req.OnExpire,
		noEgress: req.Egress != nil && !*req.Egress,
		env:      req.Env,
	}
}
