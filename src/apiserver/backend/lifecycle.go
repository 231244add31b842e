package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
)

// Delete implements the registry's Backend. A sandbox its node no longer knows
// (reaped at its deadline, or released by someone else) answers NotFound,
// as a concurrent delete does in Kubernetes, and is hidden from this
// replica's reads until the node publishes.
func (s *Service) Delete(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	cur, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	err = s.fleet.Release(ctx, sandboxOf(&cur.entry))
	if err != nil && !errors.Is(err, fleet.ErrNotFound) {
		return nil, s.statusError(err, "release", name)
	}
	last := s.remember(cur, true)
	released := err == nil
	// Another sandbox the inventory shows under the name (a claim granted
	// after the create gave up on it, an old claim whose release is not
	// published yet) goes too: otherwise it would stand under a name
	// whose delete succeeded.
	for _, other := range s.inv.AllByClaimRef(namespace, name) {
		if other.ID == cur.entry.ID {
			continue
		}
		switch err := s.fleet.Release(ctx, sandboxOf(&other)); {
		case err == nil:
			released = true
		case !errors.Is(err, fleet.ErrNotFound):
			return nil, s.statusError(err, "release", name)
		}
	}
	if !released {
		return nil, apierrors.NewNotFound(Resource, name)
	}
	if s.cfg.Names != nil {
		// Only a release this call made frees the name: after a NotFound
		// the name may already belong to a newer create.
		// Bounded like a node call: with the API down a delete answers
		// after this wait rather than after the request's whole timeout.
		freeCtx, cancel := context.WithTimeout(ctx, s.cfg.NodeTimeout)
		err := s.cfg.Names.Free(freeCtx, cur.entry.Key())
		cancel()
		if err != nil {
			// The sandbox is gone either way; the hold lapses on its own
			// within the hold TTL, and until then a create of the name
			// through another replica answers 409.
			s.cfg.Logger.Warn("Freeing a deleted sandbox's name hold failed; it lapses within the hold TTL",
				"sandbox", cur.entry.Key(), "err", err)
		}
	}
	return last, nil
}

// Pause implements the registry's Backend (sandboxd hibernate, idempotent).
func (s *Service) Pause(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	return s.transition(ctx, namespace, name, "hibernate", v1beta1.SandboxPhaseHibernated, s.fleet.Pause)
}

// Resume implements the registry's Backend (sandboxd wake, idempotent).
func (s *Service) Resume(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	return s.transition(ctx, namespace, name, "wake", v1beta1.SandboxPhaseRunning, s.fleet.Resume)
}

func (s *Service) transition(ctx context.Context, namespace, name, op string, phase v1beta1.SandboxPhase,
	verb func(context.Context, fleet.Sandbox) error) (*agentsv1beta1.Sandbox, error) {
	cur, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	if err := verb(ctx, sandboxOf(&cur.entry)); err != nil {
		return nil, s.statusError(err, op, name)
	}
	cur.entry.Phase = phase
	return s.remember(cur, false), nil
}

// Fork implements the registry's Backend: count children of the sandbox on its
// node, each named "<parent>-fork-sb-…" in the parent's namespace.
func (s *Service) Fork(ctx context.Context, namespace, name string, count int, ttlSeconds int64) ([]agentsv1beta1.Sandbox, error) {
	if ttlSeconds < 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("ttlSeconds must not be negative, got %d", ttlSeconds))
	}
	parent, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	children, err := s.fleet.Fork(ctx, sandboxOf(&parent.entry), count, int(min(ttlSeconds, maxTTLSeconds)))
	if err != nil {
		return nil, s.statusError(err, "fork", name)
	}
	out := make([]agentsv1beta1.Sandbox, 0, len(children))
	for _, c := range children {
		out = append(out, *s.remember(view{entry: entryOf(c.Sandbox)}, false))
	}
	return out, nil
}

// Snapshot implements the registry's Backend (sandboxd checkpoint).
func (s *Service) Snapshot(ctx context.Context, namespace, name, snapshotName string) (*registry.SnapshotResult, error) {
	cur, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	ck, err := s.fleet.Checkpoint(ctx, sandboxOf(&cur.entry), snapshotName)
	if err != nil {
		return nil, s.statusError(err, "checkpoint", name)
	}
	return &registry.SnapshotResult{
		ID: ck.ID, Name: ck.Name, Node: cur.entry.Node,
		CreatedAt: ck.CreatedAt.UTC().Format(time.RFC3339),
	}, nil
}
