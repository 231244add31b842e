package fleet

import "context"

// View is what a Fleet reads the fleet from.
type View interface {
	// Nodes returns the nodes that may take claims now.
	Nodes() []Node
	// List returns the sandboxes of namespace ("" is every namespace).
	List(ctx context.Context, namespace string) ([]Sandbox, error)
	// Find returns the sandbox with the canonical id in namespace ("" is
	// any), or an error wrapping ErrNotFound.
	Find(ctx context.Context, namespace, id string) (Sandbox, error)
}

// Recorder is implemented by a View that shows this process's writes
// before the nodes publish them. The Fleet calls it after every write it
// made; none of its methods may block on the network.
type Recorder interface {
	// Claimed is a sandbox this process claimed or forked.
	Claimed(Sandbox)
	// Changed is a sandbox this process paused, resumed or renewed; sb
	// carries the new Paused and Deadline.
	Changed(Sandbox)
	// Released is a sandbox this process released, or found gone.
	Released(Sandbox)
	// Unreachable is a node that did not answer at all.
	Unreachable(addr string, err error)
}
