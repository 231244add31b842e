package e2b_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// A create's lifecycle shows in info, and autoResume rides on the claim as
// the label the data plane reads.
func TestLifecycleInInfo(t *testing.T) {
	e := newEnv(t, envOptions{})
	type info struct {
		Lifecycle *struct {
			AutoResume bool   `json:"autoResume"`
			OnTimeout  string `json:"onTimeout"`
		} `json:"lifecycle"`
	}
	for _, c := range []struct {
		name       string
		body       map[string]any
		onTimeout  string
		autoResume bool
	}{
		{"kill", nil, "kill", false},
		{"pause", map[string]any{"autoPause": true}, "pause", false},
		{"pause and resume on traffic", map[string]any{"autoPause": true, "autoResume": map[string]any{"enabled": true}}, "pause", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			created := e.create(t, keyA, c.body)
			var got info
			r := e.do(t, http.MethodGet, "/sandboxes/"+created.SandboxID, keyA, nil)
			r.decode(t, &got)
			if got.Lifecycle == nil || got.Lifecycle.OnTimeout != c.onTimeout || got.Lifecycle.AutoResume != c.autoResume {
				t.Fatalf("lifecycle %+v, want onTimeout %s, autoResume %v", got.Lifecycle, c.onTimeout, c.autoResume)
			}
			id, _ := sandbox.CanonicalID(created.SandboxID)
			_, addr := e.claimToken(t, id)
			cl, err := sandboxd.New(addr, sandboxd.WithToken(rootToken))
			if err != nil {
				t.Fatal(err)
			}
			row, err := cl.Sandbox(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if sandbox.AutoResumes(row.Metadata) != c.autoResume {
				t.Fatalf("the claim's labels %v; want autoResume %v on the node", row.Metadata, c.autoResume)
			}
		})
	}
}
