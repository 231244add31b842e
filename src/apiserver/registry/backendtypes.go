package registry

import (
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// These are the words of the Backend interface: the registry defines what
// it asks of a backend, and the backend speaks them.

// Revision orders changes of the backend's view. It is process-local: a watch
// resumed against another replica gets Expired and relists, as clients do.
type Revision uint64

// EventType is the kind of change in an Event.
type EventType string

const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Event is one change of one sandbox in the backend's view.
type Event struct {
	Type     EventType
	Sandbox  *agentsv1beta1.Sandbox
	Revision Revision
}

// SnapshotResult describes a checkpoint sandboxd took.
type SnapshotResult struct {
	// ID is sandboxd's checkpoint id; Name the name asked for, if any.
	ID   string
	Name string
	// Node is where the checkpoint lives.
	Node string
	// CreatedAt is RFC 3339.
	CreatedAt string
}

// ListOptions narrows and pages a list.
//
// A paged list is ordered by namespace, then name, and pages as every
// front does (sandbox.ResumeAfter): no sandbox is listed twice, and a
// sandbox that exists for the whole paging is listed exactly once; one
// created or released in between may or may not be. A client that needs every change follows the
// list with a watch from the first page's revision (what informers do),
// which replays everything that happened while it paged.
type ListOptions struct {
	// After resumes the list after this sandbox; the zero ClaimRef starts
	// at the beginning. It need not exist any more.
	After sandbox.ClaimRef
	// Limit is the most items a page holds; 0 returns the rest of the list.
	Limit int
	// Match selects the items a page holds; nil selects all. Items it
	// turns down do not count towards Limit.
	Match func(*agentsv1beta1.Sandbox) bool
}

// ListResult is one page of a list.
type ListResult struct {
	Items []agentsv1beta1.Sandbox
	// Revision is the revision of the view the page was read from.
	Revision Revision
	// Next is where the following page starts (pass it as After). It is
	// zero when this page ends the list.
	Next sandbox.ClaimRef
	// Remaining estimates how many sandboxes follow Next: exact for an
	// inventory that holds still, off by this replica's recent writes that
	// the inventory does not show yet. -1 when unknown, because Match may
	// turn any of them down, and 0 on the last page.
	Remaining int64
}
