// Package fleet is the one fleet core both fronts stand on: claim (the
// entry and its token in one call), release, renew, pause, resume, fork,
// checkpoint, list and find, over whichever view of the sandboxd nodes the
// process has; and the rest of what a front asks of nodes (a sandbox's
// stats and its guest ports, promote, every node's templates and
// checkpoints, template labels and deletes), so the fronts never hold a
// node client. Every call to a node is bounded by Config.NodeTimeout.
//
// A View says which nodes exist, which pools they keep warm and which
// sandboxes they hold. sandbox-apiserver's view is the NodeInventory
// informer with its own recent writes laid over it (src/apiserver/backend);
// sandbox-e2b's is the gossip-discovered mesh (src/mesh). The Fleet owns
// everything else: the node-choice policy (see Order), the claim
// protocol, error classes, and telling the view what this process changed
// so reads reflect it before the nodes publish.
//
// Errors wrap ErrNotFound or one of sandboxd's error classes
// (sandboxd.ErrCapacity, ErrBadRequest, ErrConflict, ErrUnavailable, …);
// each front maps them to its own status codes in one place.
package fleet
