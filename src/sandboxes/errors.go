package sandboxes

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Resource is the group-resource every status error names.
var Resource = schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"}

// statusError turns a sandboxd failure of op on the sandbox name into the
// Kubernetes status error the caller sees. It is the one place that does:
// a sandboxd error string names the node's address, so callers get a fixed
// message per kind and the detail goes to the log (tokens never appear in
// either; the client keeps them out of its errors).
func (s *Service) statusError(err error, op, name string) error {
	var apiErr *sandboxd.APIError
	isAPI := errors.As(err, &apiErr)
	switch {
	case errors.Is(err, fleet.ErrInvalid):
		return apierrors.NewBadRequest(err.Error())
	case errors.Is(err, sandboxd.ErrNotFound), errors.Is(err, fleet.ErrNotFound):
		return apierrors.NewNotFound(Resource, name)
	case errors.Is(err, sandboxd.ErrBadRequest) && isAPI:
		// The node's own reason ("count must be 1-16", "invalid checkpoint
		// name") is about the request, not the node.
		return apierrors.NewBadRequest(op + ": " + apiErr.Message)
	case errors.Is(err, sandboxd.ErrConflict) && isAPI:
		return apierrors.NewConflict(Resource, name, errors.New(apiErr.Message))
	case errors.Is(err, sandboxd.ErrCapacity):
		return apierrors.NewTooManyRequests("the sandbox's node has no capacity for "+op+" now", s.cfg.RetryAfterSeconds)
	}
	s.cfg.Logger.Error("sandboxd call failed", "op", op, "sandbox", name, "err", err)
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return apierrors.NewTimeoutError("the sandbox's node did not answer "+op+" in time", s.cfg.RetryAfterSeconds)
	case errors.Is(err, context.Canceled):
		return apierrors.NewTimeoutError(op+" was canceled", s.cfg.RetryAfterSeconds)
	case errors.Is(err, sandboxd.ErrUnauthorized), errors.Is(err, sandboxd.ErrForbidden):
		return apierrors.NewServiceUnavailable("the sandbox's node refused this server's sandboxd token (check --sandboxd-token)")
	case isAPI:
		return apierrors.NewServiceUnavailable("the sandbox's node failed " + op)
	default:
		return apierrors.NewServiceUnavailable("the sandbox's node is unreachable")
	}
}

// noCapacity is the answer to a create no node could take.
func (s *Service) noCapacity(msg string) error {
	return apierrors.NewTooManyRequests(msg, s.cfg.RetryAfterSeconds)
}
