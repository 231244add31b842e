package records

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// NodeIndex is what the store reads of the fleet: the node at addr's
// sandbox index, with each sandbox's claim labels. The surface's Fleet
// (and *fleet.Fleet) implements it.
type NodeIndex interface {
	NodeSandboxes(ctx context.Context, addr string) ([]sandboxd.Sandbox, error)
}

// Store answers what a sandbox's create recorded, whichever replica took
// it: a bounded per-process cache in front of the claim labels, which the
// fleet's view may carry and the sandbox's node always lists.
type Store struct {
	cache *cache
	rows  *nodeRows
	log   *slog.Logger
}

// NewStore returns a store caching at most maxCached records and reading
// the rest off nodes.
func NewStore(maxCached int, nodes NodeIndex, clk clock.PassiveClock, log *slog.Logger) *Store {
	return &Store{cache: newCache(maxCached, clk), rows: newNodeRows(nodes, clk), log: log}
}

// Put caches rec as sandbox id's, replacing any earlier record; rec's
// Deadline is when it may be forgotten.
func (s *Store) Put(id string, rec Record) { s.cache.put(id, rec) }

// Extend moves id's cached record's expiry to deadline (a renew).
func (s *Store) Extend(id string, deadline time.Time) { s.cache.extend(id, deadline) }

// Drop forgets id's cached record (a kill, a release).
func (s *Store) Drop(id string) { s.cache.drop(id) }

// Of is what sb's create recorded: from this process's cache, else from
// the claim labels the view carries, else from the node's index (see
// nodeRows), whichever replica took the create. ok is false when the
// node cannot be read or does not list the sandbox.
func (s *Store) Of(ctx context.Context, sb fleet.Sandbox) (Record, bool) {
	if rec, ok := s.cache.get(sb.Namespace, sb.ID); ok {
		return rec, true
	}
	labels := sb.Metadata
	if labels == nil {
		l, found, err := s.rows.labels(ctx, sb.NodeAddr, sb.ID, sb.ClaimedAt)
		if err != nil {
			s.log.Debug("e2b: reading a sandbox's labels from its node failed", "sandbox", sb.ID, "err", err)
			return Record{}, false
		}
		if !found {
			return Record{}, false
		}
		labels = l
	}
	rec := FromLabels(sb.Namespace, labels)
	rec.Deadline = sb.Deadline
	s.cache.put(sb.ID, rec)
	return s.cache.get(sb.Namespace, sb.ID)
}
