package fleet_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// switchableView is a View whose nodes a test replaces.
type switchableView struct{ nodes atomic.Pointer[[]fleet.Node] }

func (v *switchableView) set(nodes ...fleet.Node) { v.nodes.Store(&nodes) }
func (v *switchableView) Nodes() []fleet.Node     { return *v.nodes.Load() }
func (*switchableView) List(context.Context, string) ([]fleet.Sandbox, error) {
	return nil, nil
}
func (*switchableView) Find(context.Context, string, string) (fleet.Sandbox, error) {
	return fleet.Sandbox{}, fleet.ErrNotFound
}

// cutNode is a node's address as a proxy that, while cut, answers
// nothing (a request waits until its caller gives up), and counts the
// claims that reach it and the sandbox lists (the fleet's re-checks) it
// answered.
type cutNode struct {
	addr          string
	cut           atomic.Bool
	claims        atomic.Int64
	answeredLists atomic.Int64
}

func startCutNode(t *testing.T, target string) *cutNode {
	t.Helper()
	n := &cutNode{}
	u, _ := url.Parse("http://" + target)
	rp := httputil.NewSingleHostReverseProxy(u)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/claim" {
			n.claims.Add(1)
		}
		if n.cut.Load() {
			// Only once the body is read does the server notice the
			// caller hanging up.
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
			return
		}
		rp.ServeHTTP(w, r)
		if r.Method == http.MethodGet && r.URL.Path == "/v1/sandboxes" {
			n.answeredLists.Add(1)
		}
	}))
	t.Cleanup(srv.Close)
	n.addr = srv.Listener.Addr().String()
	return n
}

// TestUnansweredNodeGoesLastUntilItAnswers: a node the view still shows
// (as a fresh NodeInventory does for a node cut off from this replica
// alone) costs the one claim that finds it silent a node timeout; later
// claims go to the other node first without waiting on it, a claim with
// no other candidate still tries it, and once it answers again (the
// re-check of the first claim hears it) it is first in line again.
func TestUnansweredNodeGoesLastUntilItAnswers(t *testing.T) {
	const root = "unanswered-root"
	const nodeTimeout = time.Second
	key := baseKey
	sim := startWarmSim(t, root, 2, 12)
	quiet := startCutNode(t, sim.Node(0).Addr())
	// The quiet node shows far more warm VMs: the order tries it first
	// whenever it is not avoided.
	quietNode := fleet.Node{Name: "quiet", Addr: quiet.addr, Warm: map[sandbox.PoolKey]int{key: 1000}}
	otherNode := fleet.Node{Name: "other", Addr: sim.Node(1).Addr(), Warm: map[sandbox.PoolKey]int{key: 1}}
	view := &switchableView{}
	view.set(quietNode, otherNode)
	f, err := fleet.New(fleet.Config{View: view, Token: root, NodeTimeout: nodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	n := 0
	claim := func() (fleet.Claimed, error) {
		n++
		return f.Claim(ctx, fleet.ClaimRequest{Ref: sandbox.ClaimRef{Namespace: "ns", Name: "c" + strconv.Itoa(n)}, Key: key, TTLSeconds: 600})
	}

	quiet.cut.Store(true)
	first, err := claim()
	if err != nil {
		t.Fatal(err)
	}
	if first.NodeAddr != sim.Node(1).Addr() || quiet.claims.Load() != 1 {
		t.Fatalf("the first claim landed on %s after %d claims reached the quiet node; want the other node after one", first.NodeAddr, quiet.claims.Load())
	}
	for range 5 {
		cl, err := claim()
		if err != nil {
			t.Fatal(err)
		}
		if cl.NodeAddr != sim.Node(1).Addr() {
			t.Fatalf("a claim landed on %s while the quiet node was silent", cl.NodeAddr)
		}
	}
	if got := quiet.claims.Load(); got != 1 {
		t.Errorf("%d claims reached the silent node; after the first, claims must go elsewhere first", got)
	}

	// With no other candidate, the silent node is still tried.
	view.set(quietNode)
	if _, err := claim(); !errors.Is(err, sandboxd.ErrUnavailable) {
		t.Errorf("a claim with only the silent node answered %v, want ErrUnavailable", err)
	}
	if got := quiet.claims.Load(); got != 2 {
		t.Errorf("%d claims reached the silent node, want 2: a lone candidate is tried", got)
	}
	view.set(quietNode, otherNode)

	// Once the node answers, the re-check hears it and it leads again.
	// The fleet records the answer just after the node gave it, so the
	// claims are polled, but only from then: before, each would cost a
	// warm VM of the other node.
	quiet.cut.Store(false)
	poll.Until(t, "a re-check answered by the node", func() bool { return quiet.answeredLists.Load() > 0 })
	poll.UntilNil(t, "a claim on the node that answers again", func() error {
		cl, err := claim()
		if err != nil {
			t.Fatal(err)
		}
		if cl.NodeAddr != sim.Node(0).Addr() {
			return fmt.Errorf("the claim landed on %s", cl.NodeAddr)
		}
		return nil
	})
}
