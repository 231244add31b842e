package buildsteps

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
)

// StepError is a build failing at one step. Step is the name the SDK maps
// back to the user's source ("base", "1", "2", …, "finalize"); Message is
// what the user is told. The underlying error, when there is one, is kept
// for errors.Is and As (a canceled build unwraps to context.Canceled) but
// never shown: it may name addresses of the system the build ran on.
type StepError struct {
	Step    string
	Message string
	cause   error
}

func (e *StepError) Error() string { return fmt.Sprintf("step %s: %s", e.Step, e.Message) }

// Unwrap returns the underlying error, nil when the step itself failed
// (a command exiting non-zero).
func (e *StepError) Unwrap() error { return e.cause }

// stepError turns what went wrong in step into a *StepError with a message
// fit for the build's user; an error that is one already passes through.
func stepError(step string, err error) error {
	if err == nil {
		return nil
	}
	var se *StepError
	if errors.As(err, &se) {
		return se
	}
	return &StepError{Step: step, Message: describe(err), cause: err}
}

// describe says what err means to the build's user without echoing
// transport details.
func describe(err error) string {
	var ge *guestError
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "the build timed out"
	case errors.Is(err, context.Canceled):
		return "the build was canceled"
	case errors.As(err, &ge):
		return ge.Error()
	}
	if ce, ok := refusal(err); ok {
		return "the sandbox refused it: " + ce.Message()
	}
	return "the sandbox could not be reached"
}

// refusal is envd's own answer refusing a request (a working directory
// that is not there, an unknown user), as opposed to a failure to reach it.
func refusal(err error) (*connect.Error, bool) {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return nil, false
	}
	switch ce.Code() {
	case connect.CodeInvalidArgument, connect.CodeNotFound, connect.CodeFailedPrecondition,
		connect.CodeUnauthenticated, connect.CodePermissionDenied, connect.CodeResourceExhausted:
		return ce, true
	}
	return nil, false
}

// guestError is a failure whose text is already meant for the user: envd's
// answer to an upload, or a step's own finding.
type guestError struct{ msg string }

func (e *guestError) Error() string { return e.msg }

func guestErrorf(format string, args ...any) error {
	return &guestError{msg: fmt.Sprintf(format, args...)}
}
