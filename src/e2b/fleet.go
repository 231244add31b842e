package e2b

import (
	"context"
	"errors"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Fleet is the surface's view of the sandboxd fleet. sandbox-apiserver
// implements it over the NodeInventory informer and its sandboxes.Service
// (so an e2b create is the same claim a kubectl create makes, and shows in
// kubectl get sandboxes); sandbox-e2b implements it over a sandboxd mesh.
//
// Every method is scoped to a namespace: a sandbox claimed in another
// namespace is ErrNotFound, exactly like one that does not exist.
type Fleet interface {
	// Claim claims a warm sandbox from req.Key's pool for req.Namespace,
	// with the claim reference <namespace>/<name>. A drained pool is an
	// error wrapping sandboxd.ErrCapacity.
	Claim(ctx context.Context, req ClaimRequest) (Claimed, error)
	// List returns the namespace's sandboxes ("" is every namespace).
	List(ctx context.Context, namespace string) ([]Sandbox, error)
	// Get finds one sandbox by id, in either spelling (sb_… or sb-…).
	Get(ctx context.Context, namespace, id string) (Sandbox, error)
	// Release, Pause (hibernate), Resume (wake) and Renew run the sandboxd
	// lifecycle verb on the owning node, with the fleet token, and make the
	// fleet view reflect it before the node next publishes.
	Release(ctx context.Context, sb Sandbox) error
	Pause(ctx context.Context, sb Sandbox) error
	Resume(ctx context.Context, sb Sandbox) error
	Renew(ctx context.Context, sb Sandbox, ttlSeconds int) (deadline time.Time, err error)
	// Node returns a sandboxd client for the owning node, carrying the
	// fleet token, for reads that change nothing (the claim token, stats,
	// checkpoints).
	Node(sb Sandbox) (*sandboxd.Client, error)
}

// ErrNotFound is a sandbox that does not exist, or exists in another
// namespace: the surface never tells the two apart.
var ErrNotFound = errors.New("sandbox not found")

// ClaimRequest is one claim the surface asks the fleet for.
type ClaimRequest struct {
	Namespace string
	// Name is the claim reference's name part, chosen by the surface.
	Name       string
	Key        sandbox.PoolKey
	TTLSeconds int
}

// Claimed is a granted claim: the sandbox and its own sandboxd token,
// from which the envd access token derives. The token never leaves the
// surface.
type Claimed struct {
	Sandbox
	ClaimToken string
}

// Sandbox is one claimed sandbox as the fleet sees it.
type Sandbox struct {
	// ID is the sandboxd id in its canonical sb_… spelling.
	ID        string
	Namespace string
	Name      string
	Key       sandbox.PoolKey
	// NodeAddr is the owning node's sandboxd host:port.
	NodeAddr  string
	ClaimedAt time.Time
	Deadline  time.Time
	Paused    bool
}
