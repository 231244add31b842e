package registry

import (
	"context"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// Backend is what the Sandbox REST storage serves from. The storage owns the
// Kubernetes REST semantics (request info, options kinds, field and label
// selection, tables, watch framing); the backend owns the fleet: it reads the
// NodeInventory view and calls sandboxd. The Sandbox service (package backend) implements it.
//
// Errors are Kubernetes status errors (k8s.io/apimachinery/pkg/api/errors):
// NotFound, AlreadyExists, BadRequest, and for a fleet with no capacity a
// retryable TooManyRequests or ServiceUnavailable carrying a retry-after.
type Backend interface {
	// Get returns one sandbox from fresh inventory.
	Get(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error)
	// ListPage returns one page of the sandboxes in namespace ("" for all
	// namespaces) and the revision of the view it was read from; zero
	// options return the whole list.
	ListPage(ctx context.Context, namespace string, opts ListOptions) (ListResult, error)
	// Watch streams changes in namespace ("" for all) after revision from;
	// from 0 starts with a synthetic Added event per existing sandbox. A
	// revision the backend no longer remembers answers an Expired (410) error.
	// The channel closes when ctx ends or the backend drops a slow watcher.
	Watch(ctx context.Context, namespace string, from Revision) (<-chan Event, error)
	// Create claims a warm microVM for sb (see docs/sandbox-apiserver.md for
	// how a Sandbox names its template, net lane, size and lease) and returns
	// the object as created, with the node-granted deadline annotated.
	Create(ctx context.Context, sb *agentsv1beta1.Sandbox) (*agentsv1beta1.Sandbox, error)
	// Delete releases the sandbox on its owning node and returns its last view.
	Delete(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error)

	// Pause hibernates, Resume wakes; both are idempotent.
	Pause(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error)
	Resume(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error)
	// Fork makes count children of the sandbox in its namespace, each with
	// the given lease (0 = node default).
	Fork(ctx context.Context, namespace, name string, count int, ttlSeconds int64) ([]agentsv1beta1.Sandbox, error)
	// Snapshot checkpoints the sandbox; name may be empty.
	Snapshot(ctx context.Context, namespace, name, snapshotName string) (*SnapshotResult, error)
}
