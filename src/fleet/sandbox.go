package fleet

import (
	"errors"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// ErrNotFound is a sandbox that does not exist, or exists in another
// namespace: no front tells the two apart.
var ErrNotFound = errors.New("sandbox not found")

// ErrNoTemplate is a promoted template no node holds.
var ErrNoTemplate = errors.New("template not found")

// Sandbox is one claimed sandbox as the fleet sees it.
type Sandbox struct {
	// ID is the sandbox id in its sandboxd spelling ("sb_…").
	ID string
	// ClaimRef places the sandbox in the Sandbox API; zero for a sandbox
	// claimed without one, which belongs to no namespace.
	sandbox.ClaimRef
	// Key is the pool the sandbox came from, as far as the view knows it
	// (an inventory entry names only the template).
	Key sandbox.PoolKey
	// Node names the owning node: its inventory name, or its address in a
	// mesh, where nodes have no other name.
	Node string
	// NodeAddr is the owning node's sandboxd host:port.
	NodeAddr  string
	ClaimedAt time.Time
	Deadline  time.Time
	Paused    bool
	// Failed names why the sandbox's VMM is down and was not restarted
	// (sandboxd's failed); empty while it is serviceable. A failed
	// sandbox stays claimed on its node until it is woken, released or
	// reaped.
	Failed string
	// Metadata are the sandbox's claim labels, when the view reads them
	// (the mesh's does; the NodeInventory's has none), and always on a
	// sandbox this process claimed.
	Metadata map[string]string
}

// Claimed is a granted claim: the sandbox and its own sandboxd token, from
// which the e2b access token derives. Fronts never log or store the token.
type Claimed struct {
	Sandbox
	Token string
}

// ClaimRequest is one claim a front asks the fleet for.
type ClaimRequest struct {
	Ref sandbox.ClaimRef
	Key sandbox.PoolKey
	// Front names the API the claim came through ("kubernetes", "e2b"):
	// one core may serve both, and only the ClaimObserver reads it.
	Front string
	// TTLSeconds is the lease asked for; 0 takes the node's default.
	TTLSeconds int
	// Metadata are the claim's labels, kept by the node with the claim
	// (sandboxd.ValidateMetadata says what is allowed).
	Metadata map[string]string
	// Promoted claims a template a node published with promote: the claim
	// enters at the nodes in At (the template's holders), never takes a
	// warm VM or cold-boots (require_promoted), and a holder that lost the
	// template refuses it rather than boot an image of the same name.
	Promoted bool
	// At are the addresses of the nodes a Promoted claim enters at.
	At []string
	// OnExpire is what the node does at the lease's end:
	// sandboxd.ExpireArchive keeps the sandbox, archived, until it is
	// woken; empty is the node's default, destroy.
	OnExpire string
	// NoEgress claims with sandboxd's "egress": false: the sandbox gets
	// no egress policy whatever its pool's.
	NoEgress bool
	// Volumes are catalog volumes the node mounts into the sandbox.
	Volumes []sandboxd.VolumeMount
}

// Node is one node that may take claims.
type Node struct {
	Name, Addr string
	// Warm is how many warm VMs the node keeps per pool key (with
	// defaults applied).
	Warm map[sandbox.PoolKey]int
}
