package fleet_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// TestAbandonRetriesUntilTheNodeAnswers: a sandbox abandoned while its
// node does not answer releases (a hung node) is released once the node
// answers again, not left claimed until its lease ends. The retries wait
// on the core's clock, a fake one here: each comes when the clock is
// stepped past its wait, and none before.
func TestAbandonRetriesUntilTheNodeAnswers(t *testing.T) {
	const root = "abandon-root"
	key := baseKey
	sim := startWarmSim(t, root, 1, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// The node sits behind a proxy that, while down is set, fails every
	// release as a node that is not there would.
	var down atomic.Bool
	var refused atomic.Int32
	down.Store(true)
	target, _ := url.Parse("http://" + sim.Node(0).Addr())
	rp := httputil.NewSingleHostReverseProxy(target)
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/release") && down.Load() {
			refused.Add(1)
			http.Error(w, "node unavailable", http.StatusServiceUnavailable)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(front.Close)

	view := nodesView{{Name: "n", Addr: front.Listener.Addr().String(), Warm: map[sandbox.PoolKey]int{key: 2}}}
	clk := clocktesting.NewFakeClock(time.Now())
	f, err := fleet.New(fleet.Config{View: view, Token: root, NodeTimeout: time.Second, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	cl, err := f.Claim(ctx, fleet.ClaimRequest{Ref: sandbox.ClaimRef{Namespace: "ns", Name: "gone"}, Key: key, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	sb := cl.Sandbox
	sb.NodeAddr = front.Listener.Addr().String() // reach it through the failing front

	f.Abandon(sb)
	node, _ := sandboxd.New(sim.Node(0).Addr(), sandboxd.WithToken(root))
	// The first release is tried at once; each retry waits on the clock.
	poll.Until(t, "the first release", func() bool { return refused.Load() == 1 })
	for want := int32(2); want <= 3; want++ {
		poll.Until(t, "the retry to wait on the clock", clk.HasWaiters)
		if got := refused.Load(); got != want-1 {
			t.Fatalf("%d releases tried before the clock moved, want %d", got, want-1)
		}
		clk.Step(fleet.OrphanMaxWait)
		poll.Until(t, fmt.Sprintf("release %d", want), func() bool { return refused.Load() == want })
	}
	if list, err := node.Sandboxes(ctx, "ns/gone"); err != nil || len(list) != 1 {
		t.Fatalf("while releases fail the node holds %v (%v), want the sandbox still there", list, err)
	}
	down.Store(false)
	poll.Until(t, "the retry to wait on the clock", clk.HasWaiters)
	clk.Step(fleet.OrphanMaxWait)
	poll.UntilNil(t, "the abandoned sandbox's release once the node answers", func() error {
		list, err := node.Sandboxes(ctx, "ns/gone")
		if err == nil && len(list) != 0 {
			err = fmt.Errorf("the node still holds %v", list)
		}
		return err
	})
}
