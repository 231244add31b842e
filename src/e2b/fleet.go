package e2b

import (
	"context"
	"net"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Fleet is what the surface needs of the fleet core; *fleet.Fleet
// implements it, over the NodeInventory view in sandbox-apiserver (so an
// e2b create shows in kubectl get sandboxes at once) and over the mesh in
// sandbox-e2b. The surface reaches the sandboxd nodes only through it
// (envd aside, which it opens over DialPort). Every call is scoped to a namespace: a sandbox of another
// namespace is fleet.ErrNotFound, like one that does not exist.
type Fleet interface {
	Claim(ctx context.Context, req fleet.ClaimRequest) (fleet.Claimed, error)
	ClaimCheckpoint(ctx context.Context, req fleet.CheckpointClaimRequest) (fleet.Claimed, error)
	// Serves reports whether some node keeps a pool of the template.
	Serves(template string) bool
	List(ctx context.Context, namespace string) ([]fleet.Sandbox, error)
	Find(ctx context.Context, namespace, id string) (fleet.Sandbox, error)
	Release(ctx context.Context, sb fleet.Sandbox) error
	// Abandon releases a sandbox the surface claimed but cannot use, in
	// the background, until its node answers.
	Abandon(sb fleet.Sandbox)
	Pause(ctx context.Context, sb fleet.Sandbox) error
	Resume(ctx context.Context, sb fleet.Sandbox) error
	// Fork makes count children of sb on its node (sandboxd's fork).
	Fork(ctx context.Context, sb fleet.Sandbox, count, ttlSeconds int) ([]fleet.Claimed, error)
	// RenewWith renews sb's lease, and may switch its expiry action.
	RenewWith(ctx context.Context, sb fleet.Sandbox, r fleet.Renewal) (time.Time, error)
	// Volumes is the fleet's volume catalog.
	Volumes(ctx context.Context) ([]sandboxd.Volume, error)
	// Current is the sandbox as its node has it now, with the node's row.
	Current(ctx context.Context, sb fleet.Sandbox) (fleet.Sandbox, *sandboxd.Sandbox, error)
	// Token reads the sandbox's own token back from its node.
	Token(ctx context.Context, sb fleet.Sandbox) (string, error)
	// Stats is sb's cpu and memory as its node measures them.
	Stats(ctx context.Context, sb fleet.Sandbox) (*sandboxd.Stats, error)
	// NodeSandboxes is the node at addr's sandbox index, with each
	// sandbox's claim labels.
	NodeSandboxes(ctx context.Context, addr string) ([]sandboxd.Sandbox, error)
	// Checkpoint checkpoints sb on its node under name.
	Checkpoint(ctx context.Context, sb fleet.Sandbox, name string) (*sandboxd.Checkpoint, error)
	// NodeCheckpoints is every node's checkpoints (a checkpoint outlives
	// the sandbox it was taken from), one entry per node, a node that
	// could not be read with its Err.
	NodeCheckpoints(ctx context.Context) []fleet.NodeCheckpoints
	DeleteCheckpoint(ctx context.Context, addr, id string) error
	// NodeTemplates is every node's promoted templates, read in parallel,
	// one entry per node, a node that could not be read with its Err.
	NodeTemplates(ctx context.Context) []fleet.NodeTemplates
	// Promote publishes the claimed sandbox as the template name on its
	// node.
	Promote(ctx context.Context, c fleet.Claimed, name string) (*sandboxd.PromoteResult, error)
	// LabelTemplate and DeleteTemplate change the promoted template key on
	// the node at addr; a non-empty digest acts only while the template
	// still has that content.
	LabelTemplate(ctx context.Context, addr string, key sandbox.PoolKey, labels map[string]string, digest string) error
	DeleteTemplate(ctx context.Context, addr string, key sandbox.PoolKey, digest string) error
	// DialPort opens port inside the sandbox through its node's relay,
	// the handshake bounded by the node timeout.
	DialPort(ctx context.Context, sb fleet.Sandbox, token string, port int) (net.Conn, error)
}

var _ Fleet = (*fleet.Fleet)(nil)
