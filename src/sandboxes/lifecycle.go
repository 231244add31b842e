package sandboxes

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apis/sandbox/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/sandboxid"
)

// forkInfix joins a parent's name and a child's sandboxd id into the
// child's name: sandboxd records each child under claim_ref_prefix + id, so
// the prefix "<ns>/<parent>-fork-" names it "<parent>-fork-sb-…" in the
// parent's namespace (see inventory.ParseClaimRef for the spelling).
const forkInfix = "-fork-"

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

// Delete implements sandbox.Backend. A sandbox its node no longer knows
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

// Pause implements sandbox.Backend (sandboxd hibernate, idempotent).
func (s *Service) Pause(ctx context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	return s.transition(ctx, namespace, name, "hibernate", v1beta1.SandboxPhaseHibernated, (*sandboxd.Client).Hibernate)
}

// Resume implements sandbox.Backend (sandboxd wake, idempotent).
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

// Fork implements sandbox.Backend: count children of the sandbox on its
// node, each named "<parent>-fork-sb-…" in the parent's namespace.
func (s *Service) Fork(ctx context.Context, namespace, name string, count int, ttlSeconds int64) ([]agentsv1beta1.Sandbox, error) {
	if count < 1 || count > s.cfg.MaxForkCount {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("count must be 1-%d, got %d", s.cfg.MaxForkCount, count))
	}
	if ttlSeconds < 0 {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("ttlSeconds must not be negative, got %d", ttlSeconds))
	}
	parent, err := s.locate(namespace, name)
	if err != nil {
		return nil, err
	}
	// Children's ids are as long as the parent's; refuse before forking a
	// name no child could carry.
	if n := len(name) + len(forkInfix) + len(parent.entry.ID); n > validation.DNS1123SubdomainMaxLength {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("name %q is too long to name fork children after", name))
	}
	prefix := inventory.RefKey(namespace, name+forkInfix)
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
		ns, childName, ok := inventory.ParseClaimRef(ref)
		id, idOK := sandboxid.Canonical(c.ID)
		if !ok || !idOK {
			// The node named a child no Sandbox can carry; it still exists
			// under its claim ref and expires with its lease.
			continue
		}
		dns, _ := sandboxid.DNS(id)
		e := inventory.Entry{
			Node: parent.entry.Node, Address: cmp.Or(c.OwnerAddr, parent.entry.Address),
			Name: ref, Phase: v1beta1.SandboxPhaseRunning, ID: id, DNSID: dns, ClaimRef: ref,
			Template: parent.entry.Template, Deadline: c.Deadline, ClaimedAt: now,
			Namespace: ns, ObjectName: childName,
		}
		out = append(out, *s.remember(view{entry: e}, false))
	}
	return out, nil
}

// Snapshot implements sandbox.Backend (sandboxd checkpoint).
func (s *Service) Snapshot(ctx context.Context, namespace, name, snapshotName string) (*sandbox.SnapshotResult, error) {
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
	return &sandbox.SnapshotResult{
		ID: ck.ID, Name: ck.Name, Node: cur.entry.Node,
		CreatedAt: ck.CreatedAt.UTC().Format(time.RFC3339),
	}, nil
}
