package buildsteps

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestStartAndReady: the start command serves HTTP only after a delay; Run
// returns once the ready command reaches it, and leaves it running.
func TestStartAndReady(t *testing.T) {
	b := claimBox(t)
	tpl := Template{
		Steps: []Step{
			{Type: TypeWorkdir, Args: []string{"/home/user/site"}},
			{Type: TypeRun, Args: []string{"echo served-page > index.html"}},
		},
		// The delay makes the first ready checks fail.
		StartCmd: "echo starting-up; sleep 2; exec python3 -m http.server 8000",
		ReadyCmd: "curl -sf http://127.0.0.1:8000/index.html",
	}
	var logs logRecorder
	start := time.Now()
	if err := Run(testCtx(t, time.Minute), b.guest, tpl, nil, logs.log); err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Errorf("Run returned after %s, before the server could be up", took)
	}
	if got := b.must(t, "user", "curl -sf http://127.0.0.1:8000/index.html"); got != "served-page" {
		t.Errorf("the server after Run answered %q", got)
	}
	for _, want := range []logLine{
		{StepFinalize, LevelInfo, "[finalize] Starting: " + tpl.StartCmd},
		{StepFinalize, LevelInfo, "starting-up"},
		{StepFinalize, LevelInfo, "[finalize] Ready"},
	} {
		if !logs.has(want.step, want.level, want.message) {
			t.Errorf("no log line %+v in\n%s", want, logs.String())
		}
	}
}

// TestStartWithoutReady: a start command alone is given a moment and left
// running.
func TestStartWithoutReady(t *testing.T) {
	b := claimBox(t)
	tpl := Template{StartCmd: "exec sleep 300"}
	start := time.Now()
	if err := Run(testCtx(t, time.Minute), b.guest, tpl, nil, nil); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < startGrace {
		t.Errorf("Run returned after %s, before the %s grace", took, startGrace)
	}
	if got := b.must(t, "root", "pgrep -x -u user sleep | wc -l"); got != "1" {
		t.Errorf("%s sleeps of user run after Run, want 1", got)
	}
}

// TestStartCommandFailing: a start command that exits non-zero fails the
// build at once, with its output, even while a ready command is pending.
func TestStartCommandFailing(t *testing.T) {
	b := claimBox(t)
	for _, ready := range []string{"", "false"} {
		tpl := Template{StartCmd: "echo no-config >&2; exit 5", ReadyCmd: ready}
		start := time.Now()
		err := Run(testCtx(t, time.Minute), b.guest, tpl, nil, nil)
		se := asStepError(t, err)
		if se.Step != StepFinalize || !strings.Contains(se.Message, "exited with code 5") || !strings.Contains(se.Message, "no-config") {
			t.Errorf("ready %q: got %+v", ready, se)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Errorf("ready %q: the failure took %s to be noticed", ready, took)
		}
	}
}

// TestReadyNeverSucceeds: the ready command is polled until the build's
// context ends; the start command is then killed.
func TestReadyNeverSucceeds(t *testing.T) {
	b := claimBox(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	tpl := Template{StartCmd: "exec sleep 300", ReadyCmd: "echo not-yet; test -e /nonexistent"}
	var logs logRecorder
	err := Run(ctx, b.guest, tpl, nil, logs.log)
	se := asStepError(t, err)
	if !logs.has(StepFinalize, LevelDebug, "not-yet") {
		t.Errorf("the ready command's output is not in the log at debug:\n%s", logs.String())
	}
	if se.Step != StepFinalize || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(se.Message, "timed out before the ready command succeeded") || !strings.Contains(se.Message, "not-yet") {
		t.Errorf("got %+v", se)
	}
	if got := b.must(t, "root", "pgrep -x sleep || true"); got != "" {
		t.Errorf("the start command still runs after the build failed: pids %s", got)
	}
}

// TestReadyWithoutStart: a ready command alone is just waited for.
func TestReadyWithoutStart(t *testing.T) {
	b := claimBox(t)
	tpl := Template{
		Steps:    []Step{{Type: TypeRun, Args: []string{"(sleep 1.5; touch /tmp/flag) >/dev/null 2>&1 &"}}},
		ReadyCmd: "test -e /tmp/flag",
	}
	if err := Run(testCtx(t, time.Minute), b.guest, tpl, nil, nil); err != nil {
		t.Fatal(err)
	}
	b.must(t, "root", "test -e /tmp/flag")
}
