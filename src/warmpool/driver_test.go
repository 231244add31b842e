package warmpool

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"k8s.io/client-go/rest"

	"github.com/cocoonstack/sandbox-operator/src/inventory"
)

type noNodes struct{}

func (noNodes) Nodes() []inventory.Node { return nil }

// TestTokenLessDriverStaysOut runs a driver without a token through many
// resync, poll and rebuild periods of the bubble's clock: it never builds
// a manager (so never enters the election nor takes the lease) and never
// PUTs.
func TestTokenLessDriverStaysOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		d, err := New(Config{RESTConfig: &rest.Config{Host: "https://127.0.0.1:1"}, Nodes: noNodes{}, Identity: "no-token", LeaseNamespace: "ns"})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		time.Sleep(10 * (DefaultSyncInterval + DefaultRebuildDelay))
		synctest.Wait()
		if d.Leading() || d.Puts() != 0 || d.builds.Load() != 0 {
			t.Fatalf("the token-less driver acted: leading=%v puts=%d builds=%d", d.Leading(), d.Puts(), d.builds.Load())
		}
		select {
		case err := <-done:
			t.Fatalf("Run returned (%v) before its context ended", err)
		default:
		}
		cancel()
		if err := <-done; err != nil {
			t.Fatalf("Run = %v after its context ended", err)
		}
	})
}
