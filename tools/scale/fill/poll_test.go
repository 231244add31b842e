package fill

import (
	"context"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// TestPollerSeesTargetsAndWarm sets pools on a small fleet (no cluster,
// no driver) while each poller waits, and checks that it returns once
// every node holds its share, with the times in order.
func TestPollerSeesTargetsAndWarm(t *testing.T) {
	for _, observe := range []string{ObserveInfo, ObserveSnapshot} {
		t.Run(observe, func(t *testing.T) { testPoller(t, observe) })
	}
}

func testPoller(t *testing.T, observe string) {
	const token = "poll-test-token"
	f, err := simfleet.Start(context.Background(), simfleet.Config{Nodes: 3, NamePrefix: "poll-", RootToken: token, EchoPorts: []int{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	key := sandbox.PoolKey{Template: "poll:1", Net: sandbox.DefaultNet, Size: sandbox.DefaultSize}
	var names, addrs []string
	for _, n := range f.Nodes() {
		names, addrs = append(names, n.Name()), append(addrs, n.Addr())
	}
	want := map[string]int{"poll-0": 2, "poll-1": 5, "poll-2": 0}
	p := newSnapshotPoller(f, key)
	if observe == ObserveInfo {
		if p, err = newInfoPoller(names, addrs, token, key, 2); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(p.stop)

	start := time.Now()
	go func() {
		time.Sleep(50 * time.Millisecond)
		for i, n := range f.Nodes() {
			c, err := sandboxd.New(n.Addr(), sandboxd.WithToken(token))
			if err != nil {
				t.Error(err)
				return
			}
			if _, err := c.SetPools(context.Background(), []sandboxd.PoolSpec{{Template: key.Template, Warm: want[names[i]]}}); err != nil {
				t.Error(err)
			}
		}
	}()
	r, err := p.await(context.Background(), want, 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.target.Sub(start) < 50*time.Millisecond {
		t.Errorf("targets seen %v after the start, before they were set", r.target.Sub(start))
	}
	if r.warm.Before(r.target) {
		t.Errorf("warm seen at %v, before the targets at %v", r.warm, r.target)
	}
	if r.stats.Sweeps < 2 || r.stats.Requests < 3 || r.stats.PeriodMs <= 0 || r.stats.Errors != 0 {
		t.Errorf("stats %+v", r.stats)
	}

	// Back to nothing: a node without the pool counts as 0.
	for _, n := range f.Nodes() {
		c, _ := sandboxd.New(n.Addr(), sandboxd.WithToken(token))
		if _, err := c.SetPools(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := p.await(context.Background(), nil, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestPollerTimesOut(t *testing.T) {
	const token = "poll-test-token"
	f, err := simfleet.Start(context.Background(), simfleet.Config{Nodes: 1, NamePrefix: "poll-", RootToken: token, EchoPorts: []int{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	p, err := newInfoPoller([]string{"poll-0"}, []string{f.Node(0).Addr()}, token, sandbox.PoolKey{Template: "never"}, 4)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.stop)
	if _, err := p.await(context.Background(), map[string]int{"poll-0": 1}, 100*time.Millisecond); err == nil {
		t.Fatal("a share nobody sets was reached")
	}
}
