//go:build linux

package simfleet_test

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// BenchmarkWarmClaim is one warm claim as a front sees it (POST /v1/claim
// to the answer), with the pool full before each: in-process guests against
// isolated machines, where the claim also hands the machine its claim. Both
// clone at sandbox-e2b-local's default --refill-delay (50 ms), so the
// refill a claim starts runs after it, as in the local system; the wait for
// it is not timed. docs/simulator.md has the numbers.
func BenchmarkWarmClaim(b *testing.B) {
	for _, isolated := range []bool{false, true} {
		name := "unisolated"
		if isolated {
			name = "isolated"
		}
		b.Run(name, func(b *testing.B) {
			cfg := simfleet.Config{
				RootToken:   rootToken,
				Pools:       []sandboxd.PoolSpec{{Template: tmpl, Warm: 2}},
				RefillDelay: 50 * time.Millisecond,
				Envd:        &simfleet.EnvdConfig{Secret: envdSecret},
			}
			if isolated {
				base, err := rootfs.Base()
				if err != nil {
					b.Fatal(err)
				}
				rt, err := isolate.New(isolate.Config{StateDir: b.TempDir(), CgroupParent: "sandbox-operator-bench-" + strconv.Itoa(os.Getpid())})
				if err != nil {
					b.Fatal(err)
				}
				defer rt.Close()
				cfg.Isolation = &simfleet.IsolationConfig{Runtime: rt, RootFS: base}
			}
			f, err := simfleet.Start(context.Background(), cfg)
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			n := f.Node(0)
			key := sandbox.PoolKey{Template: tmpl}.WithDefaults()
			c, err := sandboxd.New(n.Addr(), sandboxd.WithToken(rootToken))
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				if err := n.WaitWarm(ctx, key, 2); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				cl, err := c.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, NoRedirect: true})
				b.StopTimer()
				if err != nil {
					b.Fatal(err)
				}
				if err := c.Release(ctx, cl.ID); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
