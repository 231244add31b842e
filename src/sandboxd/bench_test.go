package sandboxd_test

import (
	"context"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// benchFleet is one simulated node whose pool refills instantly, so every
// claim in the loop is a warm hit.
func benchFleet(b *testing.B) *sandboxd.Client {
	b.Helper()
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		RootToken: "bench-root",
		Pools:     []sandboxd.PoolSpec{{Template: "base:24.04", Warm: 256}},
		EchoPorts: []int{},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	n := f.Node(0)
	if err := n.WaitWarm(context.Background(), sandbox.PoolKey{Template: "base:24.04"}, 256); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		c := n.Counters()
		if c.ClaimsCold+c.ClaimsClone > 0 {
			b.Errorf("%d claims missed the warm pool", c.ClaimsCold+c.ClaimsClone)
		}
	})
	c, err := sandboxd.New(n.Addr(), sandboxd.WithToken("bench-root"))
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkWarmClaim is one warm claim through the typed client over
// loopback HTTP: request encode, node admission and pool pop, response
// decode, on a reused keep-alive connection.
func BenchmarkWarmClaim(b *testing.B) {
	c := benchFleet(b)
	ctx := context.Background()
	req := sandboxd.ClaimRequest{Template: "base:24.04", ClaimRef: "bench/claim"}
	var ids []string
	// Release outside the timer now and then, so the benchmark measures a
	// node in steady state rather than one holding every claim ever made.
	releaseAll := func() {
		for _, id := range ids {
			if err := c.Release(ctx, id); err != nil {
				b.Fatal(err)
			}
		}
		ids = ids[:0]
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		cl, err := c.Claim(ctx, req)
		if err != nil {
			b.Fatal(err)
		}
		if ids = append(ids, cl.ID); len(ids) == 1024 {
			b.StopTimer()
			releaseAll()
			b.StartTimer()
		}
	}
	b.StopTimer()
	releaseAll()
}

// BenchmarkWarmClaimParallel is the same with concurrent callers.
func BenchmarkWarmClaimParallel(b *testing.B) {
	c := benchFleet(b)
	req := sandboxd.ClaimRequest{Template: "base:24.04"}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := c.Claim(context.Background(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
