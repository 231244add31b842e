package envdproxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// TestDialFailureCauses sorts the errors DialPort returns, including the
// ones the simulated fleet cannot be made to give (a timed-out handshake,
// an older node's 502 for a paused sandbox), into their causes.
func TestDialFailureCauses(t *testing.T) {
	relay := func(status int, msg string) error {
		return &sandboxd.APIError{Status: status, Message: msg, Op: "GET /v1/sandboxes/{id}/ports/{port}"}
	}
	connect := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	for _, c := range []struct {
		err  error
		want DialFailure
	}{
		{fmt.Errorf("sandboxd: relay: dial 10.0.0.9:7777: %w", connect), DialNodeUnreachable},
		{fmt.Errorf("sandboxd: relay: dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: os.ErrDeadlineExceeded}), DialNodeUnreachable},
		{relay(502, "guest unreachable"), DialNotListening},
		{relay(404, "sandbox not found"), DialSandboxGone},
		{relay(409, "sandbox is paused"), DialRefused},
		{relay(502, "sandbox is paused"), DialRefused},
		{relay(401, "unauthorized"), DialRefused},
		{relay(429, "node draining"), DialRefused},
		{relay(426, "Upgrade: tcp required"), DialRefused},
		{fmt.Errorf("sandboxd: relay: read response: %w", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}), DialTimeout},
		{fmt.Errorf("sandboxd: relay: %w", context.DeadlineExceeded), DialTimeout},
		{fmt.Errorf("sandboxd: relay: %w", context.Canceled), DialOther},
		{errors.New("sandboxd: relay: 101 answer upgrades to \"h2c\", not tcp"), DialOther},
	} {
		if got := dialFailureOf(c.err); got != c.want {
			t.Errorf("%v: cause %q, want %q", c.err, got, c.want)
		}
	}
}
