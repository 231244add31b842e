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

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/internal/poll"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// TestAbandonRetriesUntilTheNodeAnswers: a sandbox abandoned while its
// node does not answer releases (a hung node) is released once the node
// answers again, not left claimed until its lease ends.
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
	f, err := fleet.New(fleet.Config{View: view, Token: root, NodeTimeout: time.Second})
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
	poll.Until(t, "the release to be retried while the node fails", func() bool { return refused.Load() >= 2 })
	if list, err := node.Sandboxes(ctx, "ns/gone"); err != nil || len(list) != 1 {
		t.Fatalf("while releases fail the node holds %v (%v), want the sandbox still there", list, err)
	}
	down.Store(false)
	poll.UntilNil(t, "the abandoned sandbox's release once the node answers", func() error {
		list, err := node.Sandboxes(ctx, "ns/gone")
		if err == nil && len(list) != 0 {
			err = fmt.Errorf("the node still holds %v", list)
		}
		return err
	})
}
