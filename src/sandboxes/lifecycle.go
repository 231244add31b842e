package sandboxes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apis/sandbox/v1beta1"
	registry "github.com/cocoonstack/sandbox-operator/src/apiserver/registry/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// call runs fn against the sandbox's node within NodeTimeout.
func (s *Service) call(ctx context.Context, v *view, fn func(context.Context, *sandboxd.Client) error) error {
	cl, err := s.client(v.entry.Address)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.NodeTimeout)
	defer cancel()
	return fn(ctx, cl)
}

// Delete implements registry.Backend. A sandbox its node no longer knows
// (reaped at its deadline, or released by someone else) answers NotFound,
// as a concurrent delete does in Kubernetes, and is hidden from this
// replica's reads until the node publishes.
func (s *Service) Delete(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	cur, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	err = s.call(ctx, &cur, func(ctx context.Context, cl *sandboxd.Client) error { return cl.Release(ctx, cur.entry.ID) })
	if err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
		return nil, s.statusError(err, "release", name)
	}
	last := s.remember(cur, true)
	if err != nil {
		return nil, apierrors.NewNotFound(Resource, name)
	}
	return last, nil
}

// Pause implements registry.Backend (sandboxd hibernate, idempotent).
func (s *Service) Pause(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	return s.transition(ctx, namespace, name, "hibernate", v1beta1.SandboxPhaseHibernated, (*sandboxd.Client).Hibernate)
}

// Resume implements registry.Backend (sandboxd wake, idempotent).
func (s *Service) Resume(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	return s.transition(ctx, namespace, name, "wake", v1beta1.SandboxPhaseRunning, (*sandboxd.Client).Wake)
}

func (s *Service) transition(ctx context.Context, namespace, name, op string, phase v1beta1.SandboxPhase,
	verb func(*sandboxd.Client, context.Context, string) error) (*agentsv1beta1.Sandbox, error) {
	cur, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	if err := s.call(ctx, &cur, func(ctx context.Context, cl *sandboxd.Client) error { return verb(cl, ctx, cur.entry.ID) }); err != nil {
		return nil, s.statusError(err, op, name)
	}
	cur.entry.Phase = phase
	return s.remember(cur, false), nil
}

// Fork implements registry.Backend: count children of the sandbox on its
// node, each named "<parent>-fork-sb-…" in the parent's namespace.
func (s *Service) Fork(ctx context.Context, namespace, name string, count int, ttlSeconds int64) ([]agentsv1beta1.Sandbox, error) {
	if ttlSeconds < 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("ttlSeconds must not be negative, got %d", ttlSeconds))
	}
	parent, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	parentRef := sandbox.ClaimRef{Namespace: namespace, Name: name}
	if err := sandbox.CheckFork(parentRef, parent.entry.ID, count); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	prefix := sandbox.ForkPrefix(parentRef)
	var children []sandboxd.Claim
	err = s.call(ctx, &parent, func(ctx context.Context, cl *sandboxd.Client) error {
		var err error
		children, err = cl.Fork(ctx, parent.entry.ID, sandboxd.ForkRequest{
			Count: count, TTLSeconds: int(min(ttlSeconds, maxTTLSeconds)), ClaimRefPrefix: prefix,
		})
		return err
	})
	if err != nil {
		return nil, s.statusError(err, "fork", name)
	}
	now := s.cfg.Clock.Now()
	out := make([]agentsv1beta1.Sandbox, 0, len(children))
	for _, c := range children {
		ref := prefix + c.ID
		childRef, ok := sandbox.ParseClaimRef(ref)
		id, idOK := sandbox.CanonicalID(c.ID)
		if !ok || !idOK {
			// The node named a child no Sandbox can carry; it still exists
			// under its claim ref and expires with its lease.
			continue
		}
		dns, _ := sandbox.DNSID(id)
		e := inventory.Entry{
			Node: parent.entry.Node, Address: cmp.Or(c.OwnerAddr, parent.entry.Address),
			Name: ref, Phase: v1beta1.SandboxPhaseRunning, ID: id, DNSID: dns, ClaimRef: ref,
			Template: parent.entry.Template, Deadline: c.Deadline, ClaimedAt: now,
			Namespace: childRef.Namespace, ObjectName: childRef.Name,
		}
		out = append(out, *s.remember(view{entry: e}, false))
	}
	return out, nil
}

// Snapshot implements registry.Backend (sandboxd checkpoint).
func (s *Service) Snapshot(ctx context.Context, namespace, name, snapshotName string) (*registry.SnapshotResult, error) {
	cur, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	var ck *sandboxd.Checkpoint
	err = s.call(ctx, &cur, func(ctx context.Context, cl *sandboxd.Client) error {
		var err error
		ck, err = cl.Checkpoint(ctx, cur.entry.ID, sandboxd.CheckpointRequest{Name: snapshotName})
		return err
	})
	if err != nil {
		return nil, s.statusError(err, "checkpoint", name)
	}
	return &registry.SnapshotResult{
		ID: ck.ID, Name: ck.Name, Node: cur.entry.Node,
		CreatedAt: ck.CreatedAt.UTC().Format(time.RFC3339),
	}, nil
}
