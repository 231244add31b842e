// Package hardware_test runs the smoke checks of tests/hardware/smoke
// against a real sandboxd node.
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
// Without SANDBOXD_ADDR they skip. The same checks run against the
// simulator in every CI run (tests/hardware/twin).
package hardware_test

import (
	"os"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tests/hardware/smoke"
)

func nodeFromEnv(t *testing.T) smoke.Node {
	t.Helper()
	addr := os.Getenv("SANDBOXD_ADDR")
	if addr == "" {
		t.Skip("SANDBOXD_ADDR is not set: no sandboxd node to test against")
	}
	n := smoke.Node{Addr: addr, Token: os.Getenv("SANDBOXD_TOKEN"), Template: os.Getenv("SANDBOXD_TEMPLATE"), EnvdVersion: os.Getenv("SANDBOXD_ENVD_VERSION")}
	if n.Template == "" {
		t.Fatal("SANDBOXD_TEMPLATE must name a template with a warm pool on the node")
	}
	return n
}

// TestClaimRelayRelease claims a warm microVM, reaches envd inside it
// through the guest-port relay, and releases it.
func TestClaimRelayRelease(t *testing.T) { smoke.ClaimRelayRelease(t, nodeFromEnv(t)) }

// TestE2BSurfaceAndProxyAgainstRealEnvd drives the real envd of an e2b-rt
// image through the e2b surface and the envd proxy.
func TestE2BSurfaceAndProxyAgainstRealEnvd(t *testing.T) { smoke.E2BSurfaceAndProxy(t, nodeFromEnv(t)) }

// TestPromoteAndClone publishes a microVM as a template and claims a clone
// of it.
func TestPromoteAndClone(t *testing.T) { smoke.PromoteAndClone(t, nodeFromEnv(t)) }
