package e2b_test

import (
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/internal/e2btest"
)

// TestAuthMatrix sends every route the surface lists, with the build API
// and its upload route on, with every credential a caller might hold, and
// checks each answer against the route's rule (see e2btest): only A's key
// reaches A's objects, B's key is told what an unknown id is told, and
// none of the other credentials is a key.
func TestAuthMatrix(t *testing.T) {
	e := newEnv(t, envOptions{warm: 6, config: withBuilds(t, 2)})
	s := e2btest.Surface{
		URL: e.url, Client: e.http, Routes: e.srv.Routes(), Declared: e2b.RouteAuth(e.srv),
		KeyA: keyA, KeyB: keyB, Base: "base", RootToken: rootToken, NodeAddrs: e.fleet.Addrs(),
	}
	o := e2btest.Setup(t, s)
	n := e2btest.Run(t, s, o)
	t.Logf("e2b auth matrix: %d routes, %d instances × %d credentials = %d foreign cells, %d control cells (A's key), %d cells asserted, %d of B's 404s compared with unknown ids, %d unexpected",
		n.Routes, n.Instances, n.Credentials, n.Foreign, n.Control, n.Cells, n.Compared, n.Unexpected)
	t.Logf("routes: %q", s.Routes)
}
