package backend

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/peerwrites"
)

// replicaPair is two Services over one simulated fleet, each with an
// inventory of its own, as two sandbox-apiserver replicas have; they share
// nothing but the nodes and, when shared, their writes over real HTTP.
type replicaPair struct {
	a, b *Service
	e    *env
}

func newReplicaPair(t *testing.T, share bool) *replicaPair {
	t.Helper()
	e := newEnv(t, envOptions{nodes: 2})
	h := inventorytest.Start(t, inventorytest.Options{Clock: e.clk, StaleAfter: 90 * time.Second})
	cfg := Config{Inventory: h.Store, Token: rootToken, Clock: e.clk}
	key, err := peerwrites.DeriveKey(rootToken)
	if err != nil {
		t.Fatal(err)
	}
	// b receives a's writes and a b's, each at its own handler.
	var b *Service
	bHandler, err := peerwrites.NewHandler(peerwrites.HandlerConfig{Key: key, Clock: e.clk,
		Apply: func(ws []peerwrites.Write) { b.ApplyPeerWrites(ws) }})
	if err != nil {
		t.Fatal(err)
	}
	bSrv := httptest.NewServer(bHandler)
	t.Cleanup(bSrv.Close)
	aHandler, err := peerwrites.NewHandler(peerwrites.HandlerConfig{Key: key, Clock: e.clk,
		Apply: func(ws []peerwrites.Write) { e.svc.ApplyPeerWrites(ws) }})
	if err != nil {
		t.Fatal(err)
	}
	aSrv := httptest.NewServer(aHandler)
	t.Cleanup(aSrv.Close)
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	sharer := func(to *httptest.Server) *peerwrites.Sharer {
		s, err := peerwrites.NewSharer(peerwrites.SharerConfig{Key: key, Clock: e.clk, Timeout: 5 * time.Second,
			Peers: peerwrites.StaticPeers([]string{strings.TrimPrefix(to.URL, "http://")})})
		if err != nil {
			t.Fatal(err)
		}
		go s.Run(ctx)
		return s
	}
	if share {
		e.svc.cfg.Peers = sharer(bSrv)
		cfg.Peers = sharer(aSrv)
	}
	b, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); b.Run(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	// Both replicas see the same publish before any write.
	now := e.clk.Now()
	for _, n := range e.fleet.Nodes() {
		h.Publish(inventorytest.FromSnapshot(n.Snapshot(), now))
	}
	h.Eventually("b's inventory shows both nodes", func() bool { return len(h.Store.Nodes()) == 2 })
	return &replicaPair{a: e.svc, b: b, e: e}
}

// readAfterWrite checks each read-after-write pair across replicas, with
// no publish in between: what a answered, b answers at once, and back.
func readAfterWrite(t *testing.T, p *replicaPair) []string {
	t.Helper()
	ctx := context.Background()
	var wrong []string
	check := func(ok bool, what string) {
		if !ok {
			wrong = append(wrong, what)
		}
	}
	created, err := p.a.Create(ctx, newSandbox("team", "s1", "base"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.b.Get(ctx, "team", "s1")
	check(err == nil && got.UID == created.UID, "get on b after a create on a")
	items, _, err := p.b.List(ctx, "team")
	check(err == nil && len(items) == 1, "list on b after a create on a")
	id := ""
	if cl, _, ok := p.e.entry("team/s1"); ok {
		id = cl.ID
	}
	_, err = p.b.Fleet().Find(ctx, "team", id)
	check(err == nil, "find by id on b (the e2b surface's lookup) after a create on a")

	if _, err := p.a.Pause(ctx, "team", "s1"); err != nil {
		t.Fatal(err)
	}
	if sb, err := p.b.Fleet().Find(ctx, "team", id); err != nil || !sb.Paused {
		wrong = append(wrong, "the e2b lookup on b shows the sandbox paused after a pause on a")
	}
	if _, err := p.b.Resume(ctx, "team", "s1"); err != nil {
		wrong = append(wrong, "resume on b of a sandbox a created: "+err.Error())
	} else if sb, err := p.a.Fleet().Find(ctx, "team", id); err != nil || sb.Paused {
		wrong = append(wrong, "the e2b lookup on a shows the sandbox running after a resume on b")
	}
	sb, err := p.a.Fleet().Find(ctx, "team", id)
	if err == nil {
		deadline, err := p.a.Fleet().Renew(ctx, sb, 3600)
		if err != nil {
			t.Fatal(err)
		}
		sb, err := p.b.Fleet().Find(ctx, "team", id)
		check(err == nil && sb.Deadline.Equal(deadline), "the deadline on b after a timeout change on a")
	}

	if _, err := p.a.Delete(ctx, "team", "s1"); err != nil {
		t.Fatal(err)
	}
	_, err = p.b.Get(ctx, "team", "s1")
	check(apierrors.IsNotFound(err), "get on b after a delete on a")
	_, err = p.b.Fleet().Find(ctx, "team", id)
	check(err != nil && strings.Contains(err.Error(), fleet.ErrNotFound.Error()), "find by id on b after a delete on a")
	_, err = p.b.Create(ctx, newSandbox("team", "s1", "base"))
	check(err == nil, "a create on b of the name just deleted on a")
	_, err = p.a.Get(ctx, "team", "s1")
	check(err == nil, "get on a of the sandbox b just created")
	return wrong
}

// TestReadYourWritesAcrossReplicas: every write one replica answered,
// the other shows at once, before any node publishes it.
func TestReadYourWritesAcrossReplicas(t *testing.T) {
	if wrong := readAfterWrite(t, newReplicaPair(t, true)); len(wrong) > 0 {
		t.Fatalf("across two replicas that share their writes, these reads missed the other's write:\n%s", strings.Join(wrong, "\n"))
	}
}

// TestReplicasThatDoNotShareDisagree is the control: without sharing, the
// same reads miss, so the test above measures the sharing.
func TestReplicasThatDoNotShareDisagree(t *testing.T) {
	if wrong := readAfterWrite(t, newReplicaPair(t, false)); len(wrong) < 4 {
		t.Fatalf("replicas that do not share their writes agreed on all but %d reads; the check is not measuring sharing", len(wrong))
	}
}

// TestPeerWritesAreCheckedAgainstTheInventory: a write naming a node the
// inventory does not list at that address is ignored, as are an older
// write of a sandbox than the one shown and a create of a sandbox already
// released.
func TestPeerWritesAreCheckedAgainstTheInventory(t *testing.T) {
	svc, h, clk := storeOnly(t, Config{})
	now := clk.Now()
	inv := &v1beta1.NodeInventory{Node: "n1", Address: "10.0.0.1:7777", PublishedAt: timePtr(now)}
	inv.Name = "n1"
	h.Publish(inv)
	h.Eventually("the node is listed", func() bool { return len(h.Store.Nodes()) == 1 })
	ctx := context.Background()
	entry := peerwrites.Entry{Node: "n1", Address: "10.9.9.9:7777", Name: "team/x", Phase: "Running", ID: "sb_0123456789abcdef",
		Namespace: "team", ObjectName: "x", Deadline: now.Add(time.Hour)}
	svc.ApplyPeerWrites([]peerwrites.Write{{At: now, Entry: entry}})
	if _, err := svc.Get(ctx, "team", "x"); !apierrors.IsNotFound(err) {
		t.Fatalf("a write pointing the sandbox at an address its node does not publish was shown: %v", err)
	}
	entry.Address = "10.0.0.1:7777"
	svc.ApplyPeerWrites([]peerwrites.Write{{At: now, Entry: entry}})
	if _, err := svc.Get(ctx, "team", "x"); err != nil {
		t.Fatalf("a peer's create was not shown: %v", err)
	}
	paused := entry
	paused.Phase = string(v1beta1.SandboxPhaseHibernated)
	svc.ApplyPeerWrites([]peerwrites.Write{{At: now.Add(2 * time.Second), Entry: paused}, {At: now.Add(time.Second), Entry: entry}})
	if sb, err := svc.Fleet().Find(ctx, "team", entry.ID); err != nil || !sb.Paused {
		t.Fatalf("an older write overrode a newer one that arrived first: %+v, %v", sb, err)
	}
	svc.ApplyPeerWrites([]peerwrites.Write{{At: now.Add(3 * time.Second), Entry: entry, Deleted: true}, {At: now.Add(4 * time.Second), Entry: entry}})
	if _, err := svc.Get(ctx, "team", "x"); !apierrors.IsNotFound(err) {
		t.Fatalf("a released sandbox came back with a later write of it: %v", err)
	}
}

// TestLookupByIDAsksTheNodes: a sandbox created through a replica that
// could not tell this one (it started since) is found by id on its node,
// and shown from then on; an id no node holds is not found.
func TestLookupByIDAsksTheNodes(t *testing.T) {
	p := newReplicaPair(t, false)
	ctx := context.Background()
	if _, err := p.a.Create(ctx, newSandbox("team", "elsewhere", "base")); err != nil {
		t.Fatal(err)
	}
	cl, _, ok := p.e.entry("team/elsewhere")
	if !ok {
		t.Fatal("the create left no claim on the fleet")
	}
	if _, err := p.b.Get(ctx, "team", "elsewhere"); !apierrors.IsNotFound(err) {
		t.Fatalf("before any lookup, b already shows a sandbox it was never told of: %v", err)
	}
	sb, err := p.b.Fleet().Find(ctx, "team", cl.ID)
	if err != nil || sb.Name != "elsewhere" {
		t.Fatalf("lookup by id on b: %+v, %v", sb, err)
	}
	if _, err := p.b.Fleet().Find(ctx, "other", cl.ID); err == nil {
		t.Fatal("a lookup in another namespace found the sandbox")
	}
	if _, err := p.b.Get(ctx, "team", "elsewhere"); err != nil {
		t.Fatalf("after the lookup b does not show the sandbox: %v", err)
	}
	if _, err := p.b.Fleet().Find(ctx, "team", "sb_0123456789abcdef0123"); err == nil {
		t.Fatal("an id no node holds was found")
	}
}
