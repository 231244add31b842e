package sandboxd

import (
	"errors"
	"fmt"
	"net/http"
)

// Sentinel errors a caller branches on with errors.Is. An *APIError matches
// the sentinel of its status code.
var (
	// ErrBadRequest is a 400: the node rejected the body, key or port.
	ErrBadRequest = errors.New("sandboxd: bad request")
	// ErrUnauthorized is a 401: no bearer token, or one the node does not know.
	ErrUnauthorized = errors.New("sandboxd: unauthorized")
	// ErrForbidden is a 403: a valid tenant token on an operator surface.
	ErrForbidden = errors.New("sandboxd: forbidden")
	// ErrNotFound is a 404: unknown id, or a token that does not own it.
	ErrNotFound = errors.New("sandboxd: not found")
	// ErrConflict is a 409: the sandbox or key cannot take that verb.
	ErrConflict = errors.New("sandboxd: conflict")
	// ErrPrecondition is a 412: the record no longer matches the digest
	// the caller named.
	ErrPrecondition = errors.New("sandboxd: precondition failed")
	// ErrUpgradeRequired is a 426: a relay request without Upgrade: tcp.
	ErrUpgradeRequired = errors.New("sandboxd: upgrade required")
	// ErrCapacity is a 429: node or tenant at max_claims, or the node draining.
	ErrCapacity = errors.New("sandboxd: no capacity")
	// ErrGuestUnreachable is a 502: nothing answers on that guest port.
	ErrGuestUnreachable = errors.New("sandboxd: guest unreachable")
	// ErrUnavailable is a 503: retryable node-side refusal.
	ErrUnavailable = errors.New("sandboxd: unavailable")
	// ErrResponseTooLarge means a node answered more than the client reads.
	ErrResponseTooLarge = errors.New("sandboxd: response body too large")
	// ErrUnsupported is a verb the node does not serve: it answered the
	// path with a 404 or 405 that is not a sandboxd error body, as an
	// older sandboxd without the route does. It does not match
	// ErrNotFound: no sandbox or record is missing.
	ErrUnsupported = errors.New("sandboxd: the node does not serve this verb (an older sandboxd)")
	// ErrNoRedirectTarget means a redirect answer named peers and none of
	// them, nor the origin, granted the claim.
	ErrNoRedirectTarget = errors.New("sandboxd: no redirect target granted the claim")
)

// APIError is a non-success answer from a node: the HTTP status and the
// message of its {"error": "..."} body.
type APIError struct {
	Status  int
	Message string
	// Op names the call ("POST /v1/claim") for context; it never holds
	// tokens, ids or query values.
	Op string
	// Unsupported marks a 404 or 405 without a sandboxd error body: the
	// node has no such route (see ErrUnsupported).
	Unsupported bool
}

func (e *APIError) Error() string {
	msg := e.Message
	if e.Unsupported {
		msg = "the node does not serve this verb (an older sandboxd)"
	}
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Op == "" {
		return fmt.Sprintf("sandboxd: %d: %s", e.Status, msg)
	}
	return fmt.Sprintf("sandboxd: %s: %d: %s", e.Op, e.Status, msg)
}

// Is matches the sentinel error of the status code.
func (e *APIError) Is(target error) bool {
	if e.Unsupported {
		return target == ErrUnsupported
	}
	s := sentinelFor(e.Status)
	return s != nil && s == target
}

func sentinelFor(status int) error {
	switch status {
	case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
		return ErrBadRequest
	case http.StatusUnauthorized:
		return ErrUnauthorized
	case http.StatusForbidden:
		return ErrForbidden
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusConflict:
		return ErrConflict
	case http.StatusPreconditionFailed:
		return ErrPrecondition
	case http.StatusUpgradeRequired:
		return ErrUpgradeRequired
	case http.StatusTooManyRequests:
		return ErrCapacity
	case http.StatusBadGateway:
		return ErrGuestUnreachable
	case http.StatusServiceUnavailable:
		return ErrUnavailable
	}
	return nil
}

// StatusOf returns the HTTP status carried by err, or 0 when err is not
// (and does not wrap) an *APIError.
func StatusOf(err error) int {
	var apiErr *APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status
	}
	return 0
}
