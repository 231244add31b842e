package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Every failure the fronts map has one kind, and only a reason that is
// about the request reaches a caller.
func TestClassify(t *testing.T) {
	api := func(status int, msg string) error {
		return fmt.Errorf("fleet: op: %w", &sandboxd.APIError{Status: status, Message: msg, Op: "POST /v1/x"})
	}
	for _, tc := range []struct {
		err    error
		kind   fleet.Kind
		reason string
	}{
		{fmt.Errorf("fleet: claim: %w: bad name", fleet.ErrInvalid), fleet.KindInvalid, "fleet: claim: invalid request: bad name"},
		{api(400, "count must be 1-16"), fleet.KindInvalid, "count must be 1-16"},
		{api(404, "unknown sandbox"), fleet.KindNotFound, ""},
		{fmt.Errorf("x: %w", fleet.ErrNotFound), fleet.KindNotFound, ""},
		{fmt.Errorf("x: %w", fleet.ErrNoTemplate), fleet.KindNoTemplate, ""},
		{api(409, "egress-lane sandboxes stay live"), fleet.KindConflict, "egress-lane sandboxes stay live"},
		{api(412, "digest"), fleet.KindPrecondition, ""},
		{api(429, "node at max_claims"), fleet.KindCapacity, ""},
		{fmt.Errorf("x: %w", &sandboxd.APIError{Status: 404, Unsupported: true}), fleet.KindUnsupported, ""},
		{api(401, "bad token"), fleet.KindRefused, ""},
		{api(403, "tenant"), fleet.KindRefused, ""},
		{api(500, "provisioning failed at 10.0.0.5"), fleet.KindUnavailable, ""},
		{api(502, "guest"), fleet.KindUnavailable, ""},
		{errors.New("dial tcp 10.0.0.5:7777: connection refused"), fleet.KindUnavailable, ""},
		{fmt.Errorf("x: %w", context.DeadlineExceeded), fleet.KindTimeout, ""},
		{fmt.Errorf("x: %w", context.Canceled), fleet.KindCanceled, ""},
	} {
		if got := fleet.Classify(tc.err); got != tc.kind {
			t.Errorf("Classify(%v) = %d, want %d", tc.err, got, tc.kind)
		}
		if got := fleet.Reason(tc.err); got != tc.reason {
			t.Errorf("Reason(%v) = %q, want %q", tc.err, got, tc.reason)
		}
	}
}
