// Package smoke is the smoke harness of a sandboxd node: the checks the
// hardware tests (tests/hardware, tag hardware) run against a real node,
// and that their twin (tests/hardware/twin) runs in every CI run against
// the simulator, so a bug in the harness itself shows here and not on a
// node.
package smoke

import (
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Node is the sandboxd node a smoke check runs against.
type Node struct {
	// Addr is its host:port and Token its root api_token.
	Addr, Token string
	// Template has a warm pool on the node's none lane; for the e2b check
	// it is an e2b-rt image (envd installed).
	Template string
	// EnvdVersion is the envd version the image ships, reported by the e2b
	// surface; empty takes the surface's default.
	EnvdVersion string
}

func (n Node) client(t testing.TB) *sandboxd.Client {
	t.Helper()
	c, err := sandboxd.New(n.Addr, sandboxd.WithToken(n.Token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// ClaimRelayRelease claims a warm VM, reaches envd inside it through the
// guest-port relay, and releases it.
func ClaimRelayRelease(t testing.TB, n Node) {
	c, tmpl := n.client(t), n.Template
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	if _, err := c.Info(ctx); err != nil {
		t.Fatalf("info: %v", err)
	}
	claim, err := c.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "hardware/smoke", TTLSeconds: 120})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	owner, err := c.At(claim.OwnerAddr)
	if err != nil {
		t.Fatal(err)
	}
	releaseAtEnd(t, owner, claim.ID)

	conn, err := owner.As(claim.Token).DialPort(ctx, claim.ID, 49983)
	if err != nil {
		t.Fatalf("relay to envd: %v", err)
	}
	defer conn.Close()
	tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) { return conn, nil }}
	resp, err := (&http.Client{Transport: tr}).Get("http://envd/health")
	if err != nil {
		t.Fatalf("GET /health through the relay: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("envd /health = %d", resp.StatusCode)
	}
}
