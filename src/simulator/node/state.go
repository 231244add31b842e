package node

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// pool is one warm pool: its target and the warm VMs ready to hand out.
type pool struct {
	key           sandbox.PoolKey
	target        int
	idleHibernate time.Duration
	warm          []string // warm VM names; a claim pops the last
	refilling     int
	golden        bool
	building      bool // golden cold boot in flight
	retired       bool // dropped by PUT /v1/pools; in-flight clones are discarded
}

// claimed is one live claim.
type claimed struct {
	id             string
	token          string
	vm             string
	key            sandbox.PoolKey
	tenant         string
	claimRef       string
	metadata       map[string]string // validated, never written after the claim: rows share it
	fromCheckpoint string
	templateDigest string // set when cloned from a promoted template
	claimedAt      time.Time
	deadline       time.Time
	lease          time.Duration // what the last claim/renew granted
	hibernated     bool
	lastActive     time.Time
	openRelays     int
	idleHibernate  time.Duration
	guests         *guestSet
	claimOptions                          // on_expire, egress, env (archive.go)
	volumes        []sandboxd.VolumeMount // as applied and echoed; never written after the claim
	archiveState
	// failed names why the sandbox's machine is down (vmm.go); empty
	// while it is serviceable.
	failed string
	// rebooting is set while a wake boots a failed sandbox again.
	rebooting bool
}

// checkpoint is one captured sandbox state.
type checkpoint struct {
	rec sandboxd.Checkpoint
	seq uint64
	dir string // copy of the sandbox's scratch directory, "" if it had none
}

func randomHex(nbytes int) string {
	b := make([]byte, nbytes)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return hex.EncodeToString(b)
}

// newSandboxID returns an unguessable id; lowercase hex keeps its
// DNS-safe spelling (sb-…) valid as a host label.
func newSandboxID() string { return "sb_" + randomHex(10) }

func newCheckpointID() string { return "ck_" + randomHex(10) }

// newTemplateDirName names a promoted template's saved disk under the
// node's scratch directory; a fresh name per promote, so a re-promote
// never writes over files a clone may be reading.
func newTemplateDirName() string { return "tp_" + randomHex(10) }

func newVMName() string { return "sbx-" + randomHex(6) }

// newToken returns a 256-bit bearer token.
func newToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// row renders a sandbox as an index row; the token only when asked.
func (sb *claimed) row(withToken bool) sandboxd.Sandbox {
	claimedAt := sb.claimedAt
	r := sandboxd.Sandbox{
		ID:        sb.id,
		Key:       sb.key,
		Deadline:  sb.deadline,
		ClaimedAt: &claimedAt,
		// An archived sandbox has no VM on the node, hibernated or not.
		Hibernated:     sb.hibernated && !sb.archived,
		Archived:       sb.archived,
		FromCheckpoint: sb.fromCheckpoint,
		ClaimRef:       sb.claimRef,
		Metadata:       sb.metadata,
		OnExpire:       sb.onExpire,
		Volumes:        sb.volumes,
		Failed:         sb.failed,
	}
	if withToken {
		r.Token = sb.token
	}
	return r
}
