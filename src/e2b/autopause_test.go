package e2b_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// TestAutoPause: a sandbox created with autoPause (the SDK's
// lifecycle.onTimeout "pause") is paused when its timeout comes, kept for
// the retention, and runs again on connect; a renew moves the pause; the
// egress lane, which cannot pause, is refused up front.
func TestAutoPause(t *testing.T) {
	const lead = 2 * time.Second
	e := newEnv(t, envOptions{config: func(c *e2b.Config) {
		c.AutoPauseLead = lead
		c.AutoPauseRetention = 2 * time.Hour
	}})
	state := func(id string) string {
		t.Helper()
		var got listed
		e.do(t, http.MethodGet, "/sandboxes/"+id, keyA, nil).decode(t, &got)
		return got.State
	}
	waitPaused := func(id string, within time.Duration) {
		t.Helper()
		deadline := time.Now().Add(within)
		for state(id) != "paused" {
			if time.Now().After(deadline) {
				t.Fatalf("sandbox %s was not auto-paused within %s", id, within)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// Timeout 3 s, lead 2 s: paused about a second after the create, kept
	// for the retention instead of ending at its timeout.
	c := e.create(t, keyA, map[string]any{"timeout": 3, "autoPause": true})
	id, _ := sandbox.CanonicalID(c.SandboxID)
	waitPaused(c.SandboxID, 30*time.Second)
	if kept := time.Until(e.deadline(t, id)); kept < time.Hour {
		t.Fatalf("auto-paused sandbox is kept %s, want the 2 h retention", kept)
	}

	// Connect resumes it for the connect's timeout; its next pause comes
	// lead before that.
	r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/connect", keyA, `{"timeout":4}`)
	if r.status != http.StatusCreated {
		t.Fatalf("connect to the auto-paused sandbox = %d %s, want 201", r.status, r.body)
	}
	if got := state(c.SandboxID); got != "running" {
		t.Fatalf("state after connect = %s", got)
	}
	if left := time.Until(e.deadline(t, id)); left > 10*time.Second {
		t.Fatalf("resumed sandbox's lease is %s, want the connect's 4 s", left)
	}
	waitPaused(c.SandboxID, 30*time.Second)

	// A renew moves the pause: a long timeout shortened to 3 s pauses soon.
	long := e.create(t, keyA, map[string]any{"timeout": 600, "autoPause": true})
	if r := e.do(t, http.MethodPost, "/sandboxes/"+long.SandboxID+"/timeout", keyA, `{"timeout":3}`); r.status != http.StatusNoContent {
		t.Fatalf("setTimeout = %d %s", r.status, r.body)
	}
	waitPaused(long.SandboxID, 30*time.Second)

	// Without autoPause no pause is ever scheduled; with it, one is.
	plain := e.create(t, keyA, map[string]any{"timeout": 60})
	plainID, _ := sandbox.CanonicalID(plain.SandboxID)
	if e2b.PausePending(e.srv, plainID) {
		t.Error("a sandbox without autoPause has a pause scheduled")
	}
	paused := e.create(t, keyA, map[string]any{"timeout": 60, "autoPause": true})
	pausedID, _ := sandbox.CanonicalID(paused.SandboxID)
	if !e2b.PausePending(e.srv, pausedID) {
		t.Error("a sandbox with autoPause has no pause scheduled")
	}

	// The egress lane never hibernates, so autoPause there is refused.
	r = e.do(t, http.MethodPost, "/v2/sandboxes", keyA, `{"templateID":"base","autoPause":true}`)
	if r.status != http.StatusBadRequest {
		t.Fatalf("autoPause with internet access = %d %s, want 400", r.status, r.body)
	}
}
