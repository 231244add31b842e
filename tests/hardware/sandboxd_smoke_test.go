// Package hardware_test holds smoke tests that need a real sandboxd node.
//
// They run only when asked (Bazel tag `hardware`, see tests/README.md) and
// read the node from the environment:
//
//	SANDBOXD_ADDR      host:port of a sandboxd node
//	SANDBOXD_TOKEN     its root api_token
//	SANDBOXD_TEMPLATE  a template with a warm pool on that node (for the e2b
//	                   smoke: an e2b-rt image, envd installed, none lane)
//	SANDBOXD_ENVD_VERSION  optional: the envd version the image ships
//	                   (/etc/envd-version), reported by the e2b surface
//
// Without SANDBOXD_ADDR they skip.
package hardware_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func nodeFromEnv(t *testing.T) (*sandboxd.Client, string) {
	t.Helper()
	addr := os.Getenv("SANDBOXD_ADDR")
	if addr == "" {
		t.Skip("SANDBOXD_ADDR is not set: no sandboxd node to test against")
	}
	tmpl := os.Getenv("SANDBOXD_TEMPLATE")
	if tmpl == "" {
		t.Fatal("SANDBOXD_TEMPLATE must name a template with a warm pool on the node")
	}
	c, err := sandboxd.New(addr, sandboxd.WithToken(os.Getenv("SANDBOXD_TOKEN")))
	if err != nil {
		t.Fatal(err)
	}
	return c, tmpl
}

// TestClaimRelayRelease claims a warm microVM, reaches envd inside it through
// the guest-port relay, and releases it.
func TestClaimRelayRelease(t *testing.T) {
	c, tmpl := nodeFromEnv(t)
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
	t.Cleanup(func() {
		if err := owner.Release(context.Background(), claim.ID); err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
			t.Errorf("release: %v", err)
		}
	})

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
