package sandboxes

import agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

// Revision orders changes of the Service's view. It is process-local: a watch
// resumed against another replica gets Expired and relists, as clients do.
type Revision uint64

// EventType is the kind of change in an Event.
type EventType string

const (
	Added    EventType = "ADDED"
	Modified EventType = "MODIFIED"
	Deleted  EventType = "DELETED"
)

// Event is one change of one sandbox in the Service's view.
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
