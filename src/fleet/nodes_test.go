package fleet_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// TestNodeSandboxesListsTheNodesClaims: a node's index lists the sandbox
// claimed there with its claim labels, and not the other node's; a node
// that is down is KindUnavailable.
func TestNodeSandboxesListsTheNodesClaims(t *testing.T) {
	const root = "rows-root"
	sim := startWarmSim(t, root, 2, 1)
	f := overSim(t, sim, root)
	ctx := context.Background()
	addr := sim.Node(0).Addr()
	one, err := fleet.New(fleet.Config{View: nodesView{{Name: addr, Addr: addr, Warm: map[sandbox.PoolKey]int{baseKey: 1}}}, Token: root})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(one.Close)
	c, err := one.Claim(ctx, fleet.ClaimRequest{
		Ref: sandbox.ClaimRef{Namespace: "ns", Name: "labelled"}, Key: baseKey, TTLSeconds: 600, Metadata: map[string]string{"team": "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	rows, err := f.NodeSandboxes(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range rows {
		if sandbox.SameID(r.ID, c.ID) {
			found = r.Metadata["team"] == "a"
		}
	}
	if !found {
		t.Errorf("node 0 lists %+v, want %s with team=a", rows, c.ID)
	}
	rows, err = f.NodeSandboxes(ctx, sim.Node(1).Addr())
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if sandbox.SameID(r.ID, c.ID) {
			t.Errorf("node 1 lists node 0's sandbox %s", c.ID)
		}
	}
	if err := sim.Kill(1); err != nil {
		t.Fatal(err)
	}
	if _, err := f.NodeSandboxes(ctx, sim.Node(1).Addr()); fleet.Classify(err) != fleet.KindUnavailable {
		t.Errorf("a killed node's index = %v, want KindUnavailable", err)
	}
}

// hangingNode is a node that takes connections and never answers, until
// the test ends.
func hangingNode(t *testing.T) string {
	t.Helper()
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // runs first: Close waits for handlers
	return srv.Listener.Addr().String()
}

// TestNodeReadsAreBoundedByTheNodeTimeout: a read of every node returns
// after the node timeout when one node hangs, with that node's entry a
// timeout and the others read, even when the caller set no deadline.
func TestNodeReadsAreBoundedByTheNodeTimeout(t *testing.T) {
	const root = "hang-root"
	sim := startWarmSim(t, root, 1, 1)
	hung := hangingNode(t)
	view := nodesView{{Name: "live", Addr: sim.Node(0).Addr()}, {Name: "hung", Addr: hung}}
	f, err := fleet.New(fleet.Config{View: view, Token: root, NodeTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)

	done := make(chan []fleet.NodeTemplates, 1)
	go func() { done <- f.NodeTemplates(context.Background()) }()
	var nodes []fleet.NodeTemplates
	select {
	case nodes = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("NodeTemplates still waits on the hung node after 20 s; the node timeout is 200 ms")
	}
	if len(nodes) != 2 || nodes[0].Err != nil {
		t.Fatalf("entries %+v, want the live node read", nodes)
	}
	if k := fleet.Classify(nodes[1].Err); k != fleet.KindTimeout {
		t.Errorf("the hung node's entry: %v (kind %v), want KindTimeout", nodes[1].Err, k)
	}
	if err := f.DeleteCheckpoint(context.Background(), hung, "ck_x"); fleet.Classify(err) != fleet.KindTimeout {
		t.Errorf("a delete at the hung node = %v, want KindTimeout", err)
	}
}

// TestNodeReadsFanOutAtMostNodeFanout: a read of more nodes than the
// fan-out bound never has more than that many in flight, and reads them
// all. Each fake node holds its answer until the bound is reached, so a
// bound lower than NodeFanout never completes a read and one higher shows
// as more in flight.
func TestNodeReadsFanOutAtMostNodeFanout(t *testing.T) {
	var inflight, peak atomic.Int32
	full := make(chan struct{})
	var fullOnce sync.Once
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inflight.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		if n >= fleet.NodeFanout {
			fullOnce.Do(func() { close(full) })
		}
		select {
		case <-full:
		case <-r.Context().Done():
		}
		inflight.Add(-1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"pools":[]}`))
	})
	var view nodesView
	for range fleet.NodeFanout + 4 {
		srv := httptest.NewServer(handler)
		t.Cleanup(srv.Close)
		view = append(view, fleet.Node{Name: srv.URL, Addr: srv.Listener.Addr().String()})
	}
	f, err := fleet.New(fleet.Config{View: view, Token: "fanout", NodeTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	nodes := f.NodeTemplates(context.Background())
	if len(nodes) != len(view) {
		t.Fatalf("%d entries, want %d", len(nodes), len(view))
	}
	for _, n := range nodes {
		if n.Err != nil {
			t.Fatalf("node %s: %v", n.Addr, n.Err)
		}
	}
	if p := peak.Load(); p != fleet.NodeFanout {
		t.Errorf("%d reads in flight at the peak, want the bound %d", p, fleet.NodeFanout)
	}
}
