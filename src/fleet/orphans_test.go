package fleet_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// nodesView is a View of fixed nodes and no sandboxes.
type nodesView []fleet.Node

func (v nodesView) Nodes() []fleet.Node { return v }
func (nodesView) List(context.Context, string) ([]fleet.Sandbox, error) {
	return nil, nil
}
func (nodesView) Find(context.Context, string, string) (fleet.Sandbox, error) {
	return fleet.Sandbox{}, fleet.ErrNotFound
}

// TestLateGrantIsReleasedAndARetryKept: a node that holds a claim past
// the node timeout and grants it afterwards (a hung node running again)
// is left holding nothing for that attempt, while a retry of the same
// create (same claim reference) that lands on the same node is kept.
func TestLateGrantIsReleasedAndARetryKept(t *testing.T) {
	const root = "orphan-root"
	key := baseKey
	sim := startWarmSim(t, root, 2, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Node 0 sits behind a proxy that, while hold is set, keeps a claim
	// until the retry below has landed before passing it on: the node
	// grants it after the fleet has given up on it, and after the retry.
	const nodeTimeout = 300 * time.Millisecond
	var hold atomic.Bool
	hold.Store(true)
	retried := make(chan struct{})
	grantLate := sync.OnceFunc(func() { close(retried) })
	target, _ := url.Parse("http://" + sim.Node(0).Addr())
	rp := httputil.NewSingleHostReverseProxy(target)
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/v1/claim" && hold.Load() {
			body, _ := io.ReadAll(r.Body)
			<-retried
			req, _ := http.NewRequestWithContext(context.WithoutCancel(r.Context()), r.Method, target.String()+r.URL.RequestURI(), bytes.NewReader(body))
			req.Header = r.Header.Clone()
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(slow.Close)
	t.Cleanup(grantLate) // before slow.Close, which waits for the held claim
	slowAddr := slow.Listener.Addr().String()

	// Node 0 shows more warm VMs, so the fleet tries it first.
	view := nodesView{
		{Name: "slow", Addr: slowAddr, Warm: map[sandbox.PoolKey]int{key: 100}},
		{Name: "fast", Addr: sim.Node(1).Addr(), Warm: map[sandbox.PoolKey]int{key: 1}},
	}
	f, err := fleet.New(fleet.Config{View: view, Token: root, NodeTimeout: nodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	ref := sandbox.ClaimRef{Namespace: "ns", Name: "one"}
	first, err := f.Claim(ctx, fleet.ClaimRequest{Ref: ref, Key: key, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if first.NodeAddr != sim.Node(1).Addr() {
		t.Fatalf("the claim landed on %s, want the fast node after the slow one timed out", first.NodeAddr)
	}
	// The same create again, now that node 0 answers at once, through
	// another replica (this one tries a node that did not answer last
	// until it hears from it): it lands on node 0, under the same
	// reference.
	hold.Store(false)
	other, err := fleet.New(fleet.Config{View: view, Token: root, NodeTimeout: nodeTimeout})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(other.Close)
	retry, err := other.Claim(ctx, fleet.ClaimRequest{Ref: ref, Key: key, TTLSeconds: 600})
	if err != nil {
		t.Fatal(err)
	}
	if retry.NodeAddr != sim.Node(0).Addr() { // the node names itself as owner
		t.Fatalf("the retry landed on %s, want the slow node", retry.NodeAddr)
	}
	grantLate()

	node0, err := sandboxd.New(sim.Node(0).Addr(), sandboxd.WithToken(root))
	if err != nil {
		t.Fatal(err)
	}
	// The late grant shows up on node 0 and is then released; the retry
	// stays.
	sawLate := false
	poll.UntilNil(t, "node 0 to hold the retry alone, after the late grant", func() error {
		list, err := node0.Sandboxes(ctx, ref.String())
		if err != nil {
			return err
		}
		if len(list) > 1 {
			sawLate = true
		}
		if !sawLate || len(list) != 1 {
			return fmt.Errorf("node 0 holds %d sandboxes under %s (late grant seen: %v)", len(list), ref, sawLate)
		}
		if !sandbox.SameID(list[0].ID, retry.ID) {
			t.Fatalf("node 0 kept %s, not the retry %s", list[0].ID, retry.ID)
		}
		return nil
	})
	node1, _ := sandboxd.New(sim.Node(1).Addr(), sandboxd.WithToken(root))
	if list, err := node1.Sandboxes(ctx, ref.String()); err != nil || len(list) != 1 {
		t.Fatalf("node 1 under %s: %v %v, want the first claim", ref, list, err)
	}
}
