package backend

import (
	"context"
	"errors"
	"time"

	"golang.org/x/time/rate"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Bounds of asking the nodes for an id this replica's view does not show.
const (
	// nodeLookupRate and nodeLookupBurst bound how often a replica asks
	// every node: an id that names nothing costs one call per node, so a
	// caller sending made-up ids must not turn into a flood of node
	// calls. Past the bound the id is not found, as it would be anyway.
	nodeLookupRate  = 20
	nodeLookupBurst = 40
	// nodeLookupTimeout bounds one round of asking.
	nodeLookupTimeout = 3 * time.Second
)

// nodeLookup finds a sandbox by id on the nodes themselves. The view shows
// every write of this replica and those its peers shared; a sandbox a
// replica created before this one started (a rollout, a restart) reached
// no one, and shows here only when its node publishes. A lookup by id that
// the view misses asks the nodes, so a get, connect, pause or kill right
// after such a create finds it.
type nodeLookup struct {
	limit *rate.Limiter
}

func newNodeLookup() *nodeLookup {
	return &nodeLookup{limit: rate.NewLimiter(nodeLookupRate, nodeLookupBurst)}
}

// find asks every fresh node at once for id, in namespace ("" is any); the
// answer is the sandbox as the node holds it, or ErrNotFound.
func (l *nodeLookup) find(ctx context.Context, s *Service, namespace, id string) (fleet.Sandbox, error) {
	if !l.limit.Allow() {
		return fleet.Sandbox{}, fleet.ErrNotFound
	}
	nodes := s.inv.Nodes()
	ctx, cancel := context.WithTimeout(ctx, nodeLookupTimeout)
	defer cancel()
	found := make(chan fleet.Sandbox, len(nodes))
	for _, n := range nodes {
		if n.Address == "" {
			found <- fleet.Sandbox{}
			continue
		}
		go func() {
			row, err := s.nodeRow(ctx, n.Address, id)
			if err != nil {
				found <- fleet.Sandbox{}
				return
			}
			found <- sandboxOfRow(n, row)
		}()
	}
	for range nodes {
		sb := <-found
		if sb.ID == "" || sb.Namespace == "" || (namespace != "" && sb.Namespace != namespace) {
			continue
		}
		return sb, nil
	}
	return fleet.Sandbox{}, fleet.ErrNotFound
}

// nodeRow reads id's row from the node at addr.
func (s *Service) nodeRow(ctx context.Context, addr, id string) (sandboxd.Sandbox, error) {
	c, err := s.fleet.Client(addr)
	if err != nil {
		return sandboxd.Sandbox{}, err
	}
	row, err := c.Sandbox(ctx, id)
	if err != nil {
		return sandboxd.Sandbox{}, err
	}
	if row == nil || row.ID == "" {
		return sandboxd.Sandbox{}, errors.New("the node answered a row without an id")
	}
	return *row, nil
}

// sandboxOfRow is the fleet's view of a node's row, as the node would
// publish it.
func sandboxOfRow(n inventory.Node, row sandboxd.Sandbox) fleet.Sandbox {
	id, ok := sandbox.CanonicalID(row.ID)
	if !ok {
		return fleet.Sandbox{}
	}
	ref, ok := sandbox.ParseClaimRef(row.ClaimRef)
	if !ok {
		return fleet.Sandbox{}
	}
	sb := fleet.Sandbox{
		ID: id, ClaimRef: ref, Key: row.Key.WithDefaults(), Node: n.Name, NodeAddr: n.Address,
		Deadline: row.Deadline, Paused: row.Hibernated || row.Archived, Failed: row.Failed, Metadata: row.Metadata,
	}
	if row.ClaimedAt != nil {
		sb.ClaimedAt = *row.ClaimedAt
	}
	return sb
}
