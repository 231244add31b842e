package e2b

import (
	"context"
	"net"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Fleet is what the surface needs of the fleet core; *fleet.Fleet
// implements it, over the NodeInventory view in sandbox-apiserver (so an
// e2b create shows in kubectl get sandboxes at once) and over the mesh in
// sandbox-e2b. Every call is scoped to a namespace: a sandbox of another
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
	// Client is a fleet-token client for the node at addr; Nodes one for
	// every node (a checkpoint outlives the sandbox it was taken from).
	Client(addr string) (*sandboxd.Client, error)
	Nodes() ([]*sandboxd.Client, error)
	// DialPort opens port inside the sandbox through its node's relay,
	// the handshake bounded by the node timeout.
	DialPort(ctx context.Context, sb fleet.Sandbox, token string, port int) (net.Conn, error)
}

var _ Fleet = (*fleet.Fleet)(nil)
