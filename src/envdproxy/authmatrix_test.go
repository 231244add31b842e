package envdproxy_test

import (
	"net/http"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/internal/envdproxytest"
)

// TestAuthMatrix addresses a sandbox in each of the proxy's ways, on
// envd's port and on another guest port, with every credential a caller
// might hold, for a sandbox the locator lists and for one the proxy finds
// by asking the nodes (see envdproxytest for the rules).
func TestAuthMatrix(t *testing.T) {
	e := newEnv(t, envOptions{})
	other := e.claim(1, true)
	for _, tc := range []struct {
		name    string
		publish bool
	}{{"published", true}, {"found by asking the nodes", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cl := e.claim(0, tc.publish)
			n := envdproxytest.Run(t, envdproxytest.Plane{
				URL: e.url, Client: e.hc, Domain: domain,
				Sandbox: cl.ID, AccessToken: accessToken(cl.Token), ClaimToken: cl.Token,
				OtherAccessToken: accessToken(other.Token), RootToken: rootToken, APIKey: "e2b_some-api-key",
				Ports: []envdproxytest.Port{
					{Port: envdproxy.EnvdPort, Path: "/envs", Want: http.StatusOK},
					{Port: echoPort, Path: "/", Want: http.StatusOK},
				},
			})
			t.Logf("data-plane auth matrix: %d modes × %d ports × %d ids × %d credentials = %d cells asserted, %d unexpected",
				n.Modes, n.Ports, n.IDs, n.Credentials, n.Cells, n.Unexpected)
		})
	}
}
