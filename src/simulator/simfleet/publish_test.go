package simfleet_test

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

const inventoryPath = "/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/"

// inventoryServer stands in for the kube-apiserver on loopback: it records
// every server-side apply of a NodeInventory and echoes the object back.
type inventoryServer struct {
	srv *httptest.Server

	mu      sync.Mutex
	applies map[string]int                   // object name → applies
	latest  map[string]v1beta1.NodeInventory // object name → last applied
	bad     []string                         // requests that were not a forced apply by sandboxd-sim
}

func newInventoryServer(t *testing.T) *inventoryServer {
	s := &inventoryServer{applies: map[string]int{}, latest: map[string]v1beta1.NodeInventory{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *inventoryServer) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	name, ok := strings.CutPrefix(r.URL.Path, inventoryPath)
	var inv v1beta1.NodeInventory
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case !ok || r.Method != http.MethodPatch ||
		r.Header.Get("Content-Type") != "application/apply-patch+yaml" ||
		r.URL.Query().Get("fieldManager") != "sandboxd-sim" || r.URL.Query().Get("force") != "true":
		s.bad = append(s.bad, r.Method+" "+r.URL.String())
		http.Error(w, `{"kind":"Status","status":"Failure","code":400}`, http.StatusBadRequest)
		return
	case json.Unmarshal(body, &inv) != nil:
		s.bad = append(s.bad, "undecodable apply of "+name)
		http.Error(w, `{"kind":"Status","status":"Failure","code":400}`, http.StatusBadRequest)
		return
	}
	s.applies[name]++
	s.latest[name] = inv
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(body)
}

func (s *inventoryServer) client(t *testing.T) dynamic.Interface {
	c, err := dynamic.NewForConfig(&rest.Config{Host: s.srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond (under the server's lock) until it holds.
func (s *inventoryServer) waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, what, func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return cond()
	})
}

func TestFleetPublishesOneInventoryPerNode(t *testing.T) {
	api := newInventoryServer(t)
	f := startFleet(t, simfleet.Config{
		Nodes:   2,
		Pools:   []sandboxd.PoolSpec{{Template: tmpl, Warm: 1}},
		Publish: &simfleet.PublishConfig{Client: api.client(t), Interval: 50 * time.Millisecond},
	})
	nodes := f.Nodes()
	api.waitFor(t, "a first apply from every node", func() bool {
		return api.applies["sim-node-0"] > 0 && api.applies["sim-node-1"] > 0
	})

	cl, err := clientFor(t, nodes[0], rootToken).Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "default/published", NoRedirect: true})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	api.waitFor(t, "the claim in sim-node-0's inventory", func() bool {
		return len(api.latest["sim-node-0"].Entries) == 1
	})

	api.mu.Lock()
	defer api.mu.Unlock()
	if len(api.bad) > 0 || len(api.applies) != 2 {
		t.Fatalf("unexpected requests %v; objects applied %v", api.bad, api.applies)
	}
	for i, n := range nodes {
		inv := api.latest[n.Name()]
		if inv.Name != n.Name() || inv.Node != n.Name() || inv.Address != n.Addr() || inv.PublishedAt == nil {
			t.Errorf("node %d inventory header = %q %q %q %v", i, inv.Name, inv.Node, inv.Address, inv.PublishedAt)
		}
		if len(inv.Pools) != 1 || inv.Pools[0].Template != tmpl || inv.Pools[0].Net != "none" || inv.Pools[0].Size != "small" || inv.Pools[0].Target != 1 {
			t.Errorf("node %d pools = %+v", i, inv.Pools)
		}
	}
	e := api.latest["sim-node-0"].Entries[0]
	if e.Name != "default/published" || e.Phase != v1beta1.SandboxPhaseRunning || e.ID != cl.ID || e.ClaimRef != "default/published" ||
		e.Addr != nodes[0].Addr() || e.Template != tmpl || e.Deadline == nil || e.ClaimedAt == nil {
		t.Errorf("entry = %+v", e)
	}
	if es := api.latest["sim-node-1"].Entries; len(es) != 0 {
		t.Errorf("sim-node-1 publishes entries it does not hold: %+v", es)
	}
}

func TestFleetPublishNeedsAClient(t *testing.T) {
	if _, err := simfleet.Start(ctxT(t), simfleet.Config{Publish: &simfleet.PublishConfig{}}); err == nil {
		t.Fatal("a fleet publishing without a client started")
	}
}

func TestAdvertiseHostIsWhatNodesReportAndPublish(t *testing.T) {
	api := newInventoryServer(t)
	f := startFleet(t, simfleet.Config{
		AdvertiseHost: "localhost",
		Publish:       &simfleet.PublishConfig{Client: api.client(t), Interval: time.Hour},
	})
	n := f.Node(0)
	host, _, err := net.SplitHostPort(n.Addr())
	if err != nil || host != "localhost" {
		t.Fatalf("node advertises %q", n.Addr())
	}
	// The advertised address reaches the node, and claims report it.
	cl, err := clientFor(t, n, rootToken).Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl})
	if err != nil || cl.OwnerAddr != n.Addr() {
		t.Fatalf("claim through %s: %+v %v", n.Addr(), cl, err)
	}
	api.waitFor(t, "the first apply", func() bool { return api.applies["sim-node-0"] > 0 })
	api.mu.Lock()
	defer api.mu.Unlock()
	if got := api.latest["sim-node-0"].Address; got != n.Addr() {
		t.Fatalf("published address %q, want %q", got, n.Addr())
	}
}
