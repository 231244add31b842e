package buildsteps

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// TestFailingStepStopsTheBuild: the second step exits 3; Run names it,
// quotes its output, logs that output, and runs nothing after it.
func TestFailingStepStopsTheBuild(t *testing.T) {
	b := claimBox(t)
	tpl := Template{Steps: []Step{
		{Type: TypeRun, Args: []string{"echo first"}},
		{Type: TypeRun, Args: []string{"echo doomed-output; echo to-stderr >&2; exit 3"}},
		{Type: TypeRun, Args: []string{"touch ~/never"}},
	}, StartCmd: "touch ~/never-started"}
	var logs logRecorder
	err := Run(testCtx(t, time.Minute), b.guest, tpl, nil, logs.log)
	se := asStepError(t, err)
	if se.Step != "2" || !strings.Contains(se.Message, "command exited with code 3") ||
		!strings.Contains(se.Message, "doomed-output") || !strings.Contains(se.Message, "to-stderr") {
		t.Errorf("got %+v, want step 2, exit code 3 and the output", se)
	}
	if errors.Unwrap(err) != nil {
		t.Errorf("a command's own failure unwraps to %v", errors.Unwrap(err))
	}
	for _, want := range []logLine{
		{"1", LevelInfo, "first"},
		{"2", LevelInfo, "doomed-output"},
		{"2", LevelWarn, "to-stderr"},
	} {
		if !logs.has(want.step, want.level, want.message) {
			t.Errorf("no log line %+v in\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "[3]") {
		t.Errorf("step 3 was announced:\n%s", logs.String())
	}
	if got := b.must(t, "user", "ls ~/never ~/never-started 2>/dev/null | wc -l"); got != "0" {
		t.Errorf("steps after the failure ran: %s", got)
	}
}

// TestInvalidDefinitionFailsTheBase: Run validates before touching the
// sandbox, and blames the base.
func TestInvalidDefinitionFailsTheBase(t *testing.T) {
	err := Run(context.Background(), Guest{}, Template{Steps: []Step{{Type: "FROB"}}}, nil, nil)
	se := asStepError(t, err)
	if se.Step != StepBase || !strings.Contains(se.Message, `step 1: unknown step type "FROB"`) {
		t.Errorf("got %+v", se)
	}
}

// TestCancelStopsALongRun: canceling the context ends a RUN of sleep 600
// promptly, kills it in the sandbox, and unwraps to context.Canceled.
func TestCancelStopsALongRun(t *testing.T) {
	b := claimBox(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tpl := Template{Steps: []Step{
		{Type: TypeRun, Args: []string{"echo started; exec sleep 600"}},
		{Type: TypeRun, Args: []string{"touch ~/after"}},
	}}
	var logs logRecorder
	done := make(chan error, 1)
	go func() { done <- Run(ctx, b.guest, tpl, nil, logs.log) }()
	poll.UntilNil(t, "the command to log that it started", func() error {
		if logs.has("1", LevelInfo, "started") {
			return nil
		}
		return errors.New("the log so far:\n" + logs.String())
	})
	canceled := time.Now()
	cancel()
	var err error
	select {
	case err = <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("Run did not return within 15s of the cancel")
	}
	if took := time.Since(canceled); took > 5*time.Second {
		t.Errorf("Run took %s to return after the cancel", took)
	}
	se := asStepError(t, err)
	if se.Step != "1" || !errors.Is(err, context.Canceled) || se.Message != "the build was canceled" {
		t.Errorf("got %+v (cause %v), want step 1 canceled", se, errors.Unwrap(err))
	}
	if got := b.must(t, "root", "pgrep -x sleep || true"); got != "" {
		t.Errorf("sleep still runs in the sandbox: pids %s", got)
	}
	if got := b.must(t, "user", "ls ~/after 2>/dev/null | wc -l"); got != "0" {
		t.Error("the step after the canceled one ran")
	}
}

// TestDeadlineStopsALongRun: a build context's deadline ends the step the
// same way and is reported as a timeout.
func TestDeadlineStopsALongRun(t *testing.T) {
	b := claimBox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	tpl := Template{Steps: []Step{{Type: TypeRun, Args: []string{"sleep 600"}}}}
	start := time.Now()
	err := Run(ctx, b.guest, tpl, nil, nil)
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Run took %s with a 3s deadline", took)
	}
	se := asStepError(t, err)
	if se.Step != "1" || !errors.Is(err, context.DeadlineExceeded) || se.Message != "the build timed out" {
		t.Errorf("got %+v, want step 1 timed out", se)
	}
	if got := b.must(t, "root", "pgrep -x sleep || true"); got != "" {
		t.Errorf("sleep still runs in the sandbox: pids %s", got)
	}
}
