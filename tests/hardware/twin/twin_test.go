// Package twin_test runs the hardware smoke checks (tests/hardware/smoke)
// against the simulator in every CI run: the same code that checks a real
// sandboxd node, on a simulated node with envd and echo guests, so a bug
// in the harness shows here before anyone takes it to a node.
package twin_test

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/hardware/smoke"
)

const (
	rootToken = "twin-root-token"
	template  = "e2b-rt:smoke"
)

// startNode is one simulated node keeping template warm on the none lane,
// whose envd guests start without an access token and take the one the
// e2b surface hands them, as a real envd does.
func startNode(t *testing.T) smoke.Node {
	t.Helper()
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 1, RootToken: rootToken, Envd: &simfleet.EnvdConfig{},
		Pools: []sandboxd.PoolSpec{{Template: template, Net: "none", Size: "small", Warm: 2}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := f.Node(0).WaitWarm(ctx, sandbox.PoolKey{Template: template, Net: "none", Size: "small"}, 2); err != nil {
		t.Fatal(err)
	}
	return smoke.Node{Addr: f.Addrs()[0], Token: rootToken, Template: template}
}

func TestClaimRelayRelease(t *testing.T) { smoke.ClaimRelayRelease(t, startNode(t)) }

func TestE2BSurfaceAndProxy(t *testing.T) { smoke.E2BSurfaceAndProxy(t, startNode(t)) }

func TestPromoteAndClone(t *testing.T) { smoke.PromoteAndClone(t, startNode(t)) }
