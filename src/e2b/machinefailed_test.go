package e2b_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// killVMM kills the machine of the e2b sandbox id on whichever node holds
// it, as the OOM killer ends a sandbox that filled /dev/shm.
func (e *env) killVMM(t *testing.T, id string) {
	t.Helper()
	canon, ok := sandbox.CanonicalID(id)
	if !ok {
		t.Fatalf("sandbox id %q", id)
	}
	for _, n := range e.fleet.Nodes() {
		if n.KillVMM(canon) == nil {
			return
		}
	}
	t.Fatalf("no node holds %s", id)
}

func TestSandboxWhoseMachineFailedIsGoneAndFreesItsCap(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *e2b.Config) { c.CreateRate, c.MaxSandboxes = -1, 2 }})
	dead := e.create(t, keyA, nil)
	alive := e.create(t, keyA, nil)
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, createBody); r.status != http.StatusTooManyRequests {
		t.Fatalf("create over the cap = %d %s, want 429", r.status, r.body)
	}
	e.killVMM(t, dead.SandboxID)

	// connect and get say the sandbox is gone, and why.
	for _, call := range []struct {
		method, path string
		body         any
	}{
		{http.MethodPost, "/sandboxes/" + dead.SandboxID + "/connect", map[string]any{"timeout": 60}},
		{http.MethodGet, "/sandboxes/" + dead.SandboxID, nil},
	} {
		r := e.do(t, call.method, call.path, keyA, call.body)
		if r.status != http.StatusNotFound {
			t.Fatalf("%s %s on a sandbox whose machine failed = %d %s, want 404", call.method, call.path, r.status, r.body)
		}
		// The first answer names the failure; once the surface has
		// released the sandbox it is simply not found.
		if msg := r.errorMessage(t); !strings.Contains(msg, "machine failed") && msg != "sandbox not found" {
			t.Errorf("%s %s message %q, want it to say the machine failed", call.method, call.path, msg)
		}
	}

	// It is no longer listed, and no longer counts against the cap.
	var items []struct {
		SandboxID string `json:"sandboxID"`
	}
	e.do(t, http.MethodGet, "/v2/sandboxes", keyA, nil).decode(t, &items)
	if len(items) != 1 || items[0].SandboxID != alive.SandboxID {
		t.Errorf("list = %+v, want only the live sandbox %s", items, alive.SandboxID)
	}
	e.create(t, keyA, nil)
}

func TestConnectToASandboxWhoseMachineFailedSaysSo(t *testing.T) {
	e := newEnv(t, envOptions{})
	sb := e.create(t, keyA, nil)
	e.killVMM(t, sb.SandboxID)
	r := e.do(t, http.MethodPost, "/sandboxes/"+sb.SandboxID+"/connect", keyA, map[string]any{"timeout": 60})
	if r.status != http.StatusNotFound {
		t.Fatalf("connect = %d %s, want 404", r.status, r.body)
	}
	if msg := r.errorMessage(t); !strings.Contains(msg, "machine failed (vmm exited") {
		t.Errorf("connect message %q, want it to say the machine failed and how", msg)
	}
}
