package e2b_test

import (
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

type forkResult struct {
	Sandbox *created `json:"sandbox"`
	Error   *struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// A fork of two: each child is a sandbox of its own with its own lease,
// the parent's metadata and alias, and an envd that takes the access token
// derived from the child's own claim; the parent keeps running.
func TestForkMakesChildrenWithTheParentsState(t *testing.T) {
	e := newEnv(t, envOptions{})
	parent := e.create(t, keyA, map[string]any{"metadata": map[string]string{"owner": "ana"}, "timeout": 600})
	r := e.do(t, http.MethodPost, "/sandboxes/"+parent.SandboxID+"/fork", keyA, map[string]any{"count": 2, "timeout": 120})
	if r.status != http.StatusCreated {
		t.Fatalf("fork = %d %s", r.status, r.body)
	}
	var results []forkResult
	r.decode(t, &results)
	if len(results) != 2 {
		t.Fatalf("fork of 2 answered %d results", len(results))
	}
	ids := []string{parent.SandboxID}
	for i, res := range results {
		if res.Sandbox == nil || res.Error != nil {
			t.Fatalf("result %d: %+v", i, res)
		}
		child := res.Sandbox
		if slices.Contains(ids, child.SandboxID) {
			t.Fatalf("child %s repeats an id of %v", child.SandboxID, ids)
		}
		ids = append(ids, child.SandboxID)
		id, _ := sandbox.CanonicalID(child.SandboxID)
		token, _ := e.claimToken(t, id)
		if child.EnvdAccessToken != derived(token) {
			t.Errorf("child %s: access token is not the one derived from its own claim", child.SandboxID)
		}
		if got := e.envdGet(t, id, child.EnvdAccessToken, "/envs"); got.status != http.StatusOK {
			t.Errorf("child %s: its envd refused its access token: %d %s", child.SandboxID, got.status, got.body)
		}
		var info listed
		g := e.do(t, http.MethodGet, "/sandboxes/"+child.SandboxID, keyA, nil)
		if g.status != http.StatusOK {
			t.Fatalf("get child = %d %s", g.status, g.body)
		}
		g.decode(t, &info)
		if info.Metadata["owner"] != "ana" || info.State != "running" || info.Alias != "base" {
			t.Errorf("child %s: metadata %v, state %s, alias %q; want the parent's metadata and alias, running", child.SandboxID, info.Metadata, info.State, info.Alias)
		}
		if left := time.Until(info.EndAt); left > 3*time.Minute || left < time.Minute {
			t.Errorf("child %s ends in %v, want its own 120 s lease", child.SandboxID, left)
		}
	}
	if g := e.do(t, http.MethodGet, "/sandboxes/"+parent.SandboxID, keyA, nil); g.status != http.StatusOK {
		t.Fatalf("the parent after the fork: %d %s", g.status, g.body)
	}
}

func TestForkRefusals(t *testing.T) {
	e := newEnv(t, envOptions{})
	parent := e.create(t, keyA, nil)
	for _, c := range []struct {
		name string
		key  string
		id   string
		body map[string]any
		want int
	}{
		{"count over sandboxd's max_fork_count", keyA, parent.SandboxID, map[string]any{"count": 17}, http.StatusBadRequest},
		{"count of zero", keyA, parent.SandboxID, map[string]any{"count": 0}, http.StatusBadRequest},
		{"negative timeout", keyA, parent.SandboxID, map[string]any{"timeout": -1}, http.StatusBadRequest},
		{"another namespace's key", keyB, parent.SandboxID, nil, http.StatusNotFound},
		{"an unknown sandbox", keyA, "sb-00000000000000000000", nil, http.StatusNotFound},
	} {
		t.Run(c.name, func(t *testing.T) {
			before := e.live(t)
			if r := e.do(t, http.MethodPost, "/sandboxes/"+c.id+"/fork", c.key, c.body); r.status != c.want {
				t.Fatalf("= %d %s, want %d", r.status, r.body, c.want)
			}
			if after := e.live(t); after != before {
				t.Fatalf("a refused fork changed the fleet's claims from %d to %d", before, after)
			}
		})
	}
}
