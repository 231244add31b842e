package backend

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/namehold"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Create implements the registry's Backend: it resolves the pool key and lease
// (refusing a bad object before any VM is spent), then claims through the
// fleet core, which picks the node (fleet.Order) and moves on when one
// refuses or does not answer.
func (s *Service) Create(ctx context.Context, in *agentsv1beta1.Sandbox) (*agentsv1beta1.Sandbox, error) {
	if in == nil {
		return nil, apierrors.NewBadRequest("no sandbox in the request")
	}
	sb := in.DeepCopy()
	if sb.Name == "" && sb.GenerateName != "" {
		sb.Name = sb.GenerateName + utilrand.String(5)
	}
	ref, err := sandbox.NewClaimRef(sb.Namespace, sb.Name)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	key, err := poolKeyFor(sb)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	now := s.cfg.Clock.Now()
	ttl, err := leaseFor(sb, now)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}

	s.mu.Lock()
	_, exists := s.currentLocked(ref.String())
	_, inFlight := s.creating[ref.String()]
	if exists || inFlight {
		s.mu.Unlock()
		return nil, apierrors.NewAlreadyExists(Resource, sb.Name)
	}
	s.creating[ref.String()] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.creating, ref.String())
		s.mu.Unlock()
	}()

	if err := s.holdName(ctx, ref.String(), sb.Name); err != nil {
		return nil, err
	}
	claimed, err := s.fleet.Claim(ctx, fleet.ClaimRequest{Ref: ref, Key: key, TTLSeconds: ttl, Front: metrics.FrontKubernetes})
	if err != nil {
		if s.cfg.Names != nil {
			s.cfg.Names.Release(ref.String())
		}
		return nil, s.claimError(err, key, sb.Name)
	}
	sb.Annotations = cloneMap(sb.Annotations)
	sb.Annotations[sandbox.AnnotationNet] = key.Net
	sb.Annotations[sandbox.AnnotationSize] = key.Size
	e := entryOf(claimed.Sandbox)
	e.ClaimedAt = now
	return s.remember(view{entry: e, obj: sb}, false), nil
}

// holdName takes the cross-replica hold on key before any VM is claimed.
// Whatever keeps the hold from being taken refuses the create: claiming
// without it could leave two sandboxes under one name.
func (s *Service) holdName(ctx context.Context, key, name string) error {
	if s.cfg.Names == nil {
		return nil
	}
	err := s.cfg.Names.Acquire(ctx, key)
	switch {
	case errors.Is(err, namehold.ErrHeld):
		return apierrors.NewAlreadyExists(Resource, name)
	case errors.Is(err, namehold.ErrFull):
		return apierrors.NewTooManyRequests("too many sandbox creates are in flight; retry later", s.cfg.RetryAfterSeconds)
	case err != nil:
		s.cfg.Logger.Warn("Could not hold a sandbox name across replicas", "sandbox", key, "err", err)
		return apierrors.NewServiceUnavailable("the name could not be reserved across replicas; retry later")
	}
	// The inventory may have shown the name while the hold was taken (a
	// hold that had lapsed after its sandbox was published).
	s.mu.Lock()
	_, exists := s.currentLocked(key)
	s.mu.Unlock()
	if exists {
		s.cfg.Names.Release(key)
		return apierrors.NewAlreadyExists(Resource, name)
	}
	return nil
}

// claimError is the status of a create the fleet could not place.
func (s *Service) claimError(err error, key sandbox.PoolKey, name string) error {
	switch {
	case errors.Is(err, sandboxd.ErrCapacity):
		return s.noCapacity(fmt.Sprintf("no node has a warm sandbox for template %q (net %s, size %s) now; retry later", key.Template, key.Net, key.Size))
	case errors.Is(err, sandboxd.ErrUnavailable) && sandboxd.StatusOf(err) == 0:
		s.cfg.Logger.Info("No node with warm capacity answered a claim", "sandbox", name, "err", err)
		return apierrors.NewServiceUnavailable("no node with warm capacity could be reached for the claim")
	}
	return s.statusError(err, "claim", name)
}

func cloneMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m)+6)
	for k, v := range m {
		out[k] = v
	}
	return out
}
