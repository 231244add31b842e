package backend

import (
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
)

// Resource is the group-resource every status error names.
var Resource = schema.GroupResource{Group: agentsv1beta1.GroupVersion.Group, Resource: "sandboxes"}

// statusError turns a sandboxd failure of op on the sandbox name into the
// Kubernetes status error the caller sees. It is the one place that does:
// a sandboxd error string names the node's address, so callers get a fixed
// message per kind and the detail goes to the log (tokens never appear in
// either; the client keeps them out of its errors).
func (s *Service) statusError(err error, op, name string) error {
	reason := fleet.Reason(err)
	switch kind := fleet.Classify(err); kind {
	case fleet.KindInvalid:
		if reason == "" {
			reason = "the request was refused as invalid"
		}
		return apierrors.NewBadRequest(op + ": " + reason)
	case fleet.KindNotFound, fleet.KindNoTemplate:
		return apierrors.NewNotFound(Resource, name)
	case fleet.KindConflict:
		if reason == "" {
			reason = "the sandbox cannot " + op + " in its current state"
		}
		return apierrors.NewConflict(Resource, name, errors.New(reason))
	case fleet.KindPrecondition:
		return apierrors.NewConflict(Resource, name, errors.New("it changed while "+op+" ran; read it again and retry"))
	case fleet.KindCapacity:
		return apierrors.NewTooManyRequests("the sandbox's node has no capacity for "+op+" now", s.cfg.RetryAfterSeconds)
	case fleet.KindUnsupported:
		s.cfg.Logger.Info("A node does not serve a verb", "op", op, "sandbox", name, "err", err)
		return apierrors.NewMethodNotSupported(Resource, op+" (the sandbox's node runs an older sandboxd without it)")
	}
	s.cfg.Logger.Error("sandboxd call failed", "op", op, "sandbox", name, "err", err)
	switch fleet.Classify(err) {
	case fleet.KindTimeout:
		return apierrors.NewTimeoutError("the sandbox's node did not answer "+op+" in time", s.cfg.RetryAfterSeconds)
	case fleet.KindCanceled:
		return apierrors.NewTimeoutError(op+" was canceled", s.cfg.RetryAfterSeconds)
	case fleet.KindRefused:
		return apierrors.NewServiceUnavailable("the sandbox's node refused this server's sandboxd token (check --sandboxd-token)")
	case fleet.KindUnavailable:
		return apierrors.NewServiceUnavailable("the sandbox's node is unreachable or failed " + op)
	}
	return apierrors.NewInternalError(errors.New(op + " failed"))
}

// noCapacity is the answer to a create no node could take.
func (s *Service) noCapacity(msg string) error {
	return apierrors.NewTooManyRequests(msg, s.cfg.RetryAfterSeconds)
}
