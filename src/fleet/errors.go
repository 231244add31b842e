package fleet

import (
	"context"
	"errors"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Kind is the class of a failed fleet or node call: the one vocabulary the
// fronts map to their status codes, each from one table, so the Sandbox
// API and the e2b surface answer the same failure alike.
type Kind int

const (
	// KindInternal is a failure none of the other kinds names.
	KindInternal Kind = iota
	// KindInvalid is a request that can never succeed as sent: ErrInvalid,
	// or a node's 400.
	KindInvalid
	// KindNotFound is a sandbox or record that does not exist (or exists
	// in another namespace: no front tells the two apart).
	KindNotFound
	// KindNoTemplate is a template no node holds.
	KindNoTemplate
	// KindConflict is a verb the sandbox cannot take in its state, or a
	// name already taken (a node's 409).
	KindConflict
	// KindPrecondition is a record that changed since the caller read it
	// (a node's 412).
	KindPrecondition
	// KindCapacity is no capacity now: no warm VM, a node or tenant at
	// max_claims, a draining node (a node's 429). Retry later.
	KindCapacity
	// KindUnsupported is a verb the node does not serve (an older
	// sandboxd).
	KindUnsupported
	// KindRefused is a node that refused the fleet's own token: a
	// configuration error of this server, not the caller's.
	KindRefused
	// KindUnavailable is a node that could not be reached or asked for a
	// retry (503), or a guest that did not answer (502).
	KindUnavailable
	// KindTimeout is a call that ran out of its time.
	KindTimeout
	// KindCanceled is a call its caller gave up on.
	KindCanceled
)

// Classify names the kind of err.
func Classify(err error) Kind {
	switch {
	case err == nil:
		return KindInternal
	case errors.Is(err, ErrInvalid), errors.Is(err, sandboxd.ErrBadRequest):
		return KindInvalid
	case errors.Is(err, ErrNoTemplate):
		return KindNoTemplate
	case errors.Is(err, ErrNotFound), errors.Is(err, sandboxd.ErrNotFound):
		return KindNotFound
	case errors.Is(err, sandboxd.ErrConflict):
		return KindConflict
	case errors.Is(err, sandboxd.ErrPrecondition):
		return KindPrecondition
	case errors.Is(err, sandboxd.ErrCapacity):
		return KindCapacity
	case errors.Is(err, sandboxd.ErrUnsupported):
		return KindUnsupported
	case errors.Is(err, sandboxd.ErrUnauthorized), errors.Is(err, sandboxd.ErrForbidden):
		return KindRefused
	case errors.Is(err, context.DeadlineExceeded):
		return KindTimeout
	case errors.Is(err, context.Canceled):
		return KindCanceled
	case errors.Is(err, sandboxd.ErrUnavailable), errors.Is(err, sandboxd.ErrGuestUnreachable),
		sandboxd.StatusOf(err) >= 500, unreachable(context.Background(), err):
		// A node's own 5xx (a failed provision) is the node's failure,
		// as a node that cannot be reached is: retry.
		return KindUnavailable
	}
	return KindInternal
}

// Reason is what a caller may be told of err beyond its kind: the node's
// own message for a request it refused (400, 409), which is about the
// request, or the fleet's ErrInvalid text. Anything else names nodes or
// addresses, so it is "".
func Reason(err error) string {
	var apiErr *sandboxd.APIError
	switch k := Classify(err); {
	case errors.As(err, &apiErr) && (k == KindInvalid || k == KindConflict):
		return apiErr.Message
	case k == KindInvalid && errors.Is(err, ErrInvalid):
		return err.Error()
	}
	return ""
}

// kindNames are the Kinds as metric label values and log words: a fixed
// set, so a label built from a Kind stays bounded.
var kindNames = [...]string{
	KindInternal:     "internal",
	KindInvalid:      "invalid",
	KindNotFound:     "not_found",
	KindNoTemplate:   "no_template",
	KindConflict:     "conflict",
	KindPrecondition: "precondition",
	KindCapacity:     "capacity",
	KindUnsupported:  "unsupported",
	KindRefused:      "refused",
	KindUnavailable:  "unavailable",
	KindTimeout:      "timeout",
	KindCanceled:     "canceled",
}

// String is the kind's name: "capacity", "not_found", ….
func (k Kind) String() string {
	if k < 0 || int(k) >= len(kindNames) {
		return kindNames[KindInternal]
	}
	return kindNames[k]
}
