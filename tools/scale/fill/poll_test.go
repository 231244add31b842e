package fill

import (
	"context"
	"sync/atomic"
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

	// The pools are set once the poller's first sweep has read every
	// node, so it waits (it saw poll-0 and poll-1 short of their shares)
	// before anything changes.
	firstSweep := make(chan struct{})
	var reads atomic.Int64
	read := p.read
	p.read = func(ctx context.Context, i int) (sandboxd.PoolStatus, error) {
		row, err := read(ctx, i)
		if reads.Add(1) == int64(len(names)) {
			close(firstSweep)
		}
		return row, err
	}

	var setAt time.Time
	setting := make(chan struct{})
	go func() {
		<-firstSweep
		setAt = time.Now()
		close(setting)
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
	<-setting
	// A read's time is taken once it returned, so one that saw the
	// targets ended after the first of them was set.
	if r.target.Before(setAt) {
		t.Errorf("targets seen at %v, before they were set at %v", r.target, setAt)
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
