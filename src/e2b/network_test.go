package e2b_test

import (
	"net/http"
	"strings"
	"testing"
)

// network.denyOut [0.0.0.0/0] is e2b's spelling of allowInternetAccess
// false: the isolated lane, which can pause. Every other egress rule is
// refused with sandboxd's model in the message.
func TestDenyAllEgressIsTheIsolatedLane(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := e.create(t, keyA, map[string]any{"network": map[string]any{"denyOut": []string{"0.0.0.0/0"}}, "allow_internet_access": nil})
	var d detail
	r := e.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, keyA, nil)
	r.decode(t, &d)
	if d.AllowInternetAccess == nil || *d.AllowInternetAccess {
		t.Fatalf("allowInternetAccess = %v, want false", d.AllowInternetAccess)
	}
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/pause", keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("pause of a sandbox created with denyOut all = %d %s, want 204 (the isolated lane)", r.status, r.body)
	}

	for name, body := range map[string]map[string]any{
		"an allow rule":         {"templateID": "base", "network": map[string]any{"allowOut": []string{"1.1.1.1"}}},
		"a narrower deny":       {"templateID": "base", "network": map[string]any{"denyOut": []string{"10.0.0.0/8"}}},
		"deny all and internet": {"templateID": "base", "allow_internet_access": true, "network": map[string]any{"denyOut": []string{"0.0.0.0/0"}}},
	} {
		t.Run(name, func(t *testing.T) {
			r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, body)
			if r.status != http.StatusBadRequest {
				t.Fatalf("= %d %s, want 400", r.status, r.body)
			}
			if msg := r.errorMessage(t); name != "deny all and internet" && !strings.Contains(msg, "node operator") {
				t.Errorf("message %q does not name sandboxd's model", msg)
			}
		})
	}
}
