package inventorylocator_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/envdproxy/inventorylocator"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

func entry(id, ref, addr string) node.EntrySnapshot {
	name := ref
	if name == "" {
		name = id
	}
	return node.EntrySnapshot{Name: name, Phase: node.PhaseRunning, ID: id, ClaimRef: ref, Addr: addr,
		Template: "t", Deadline: time.Now().Add(time.Hour), ClaimedAt: time.Now()}
}

func TestLocatorFiltersByNamespace(t *testing.T) {
	h := inventorytest.Start(t, inventorytest.Options{})
	now := time.Now()
	h.Publish(inventorytest.FromSnapshot(node.Snapshot{Node: "n1", Address: "10.0.0.1:7777", Entries: []node.EntrySnapshot{
		entry("sb_aaaa", "default/a", "10.0.0.1:7777"),
		entry("sb_bbbb", "other/b", "10.0.0.1:7777"),
		entry("sb_cccc", "", "10.0.0.1:7777"),
	}}, now))
	h.Publish(inventorytest.FromSnapshot(node.Snapshot{Node: "n2", Address: "10.0.0.2:7777"}, now))
	h.Publish(inventorytest.FromSnapshot(node.Snapshot{Node: "n3"}, now)) // no address
	h.Eventually("inventory indexed", func() bool { return len(h.Store.Nodes()) == 3 })

	inDefault := inventorylocator.New(h.Store, "default")
	everywhere := inventorylocator.New(h.Store, "")
	for _, c := range []struct {
		loc    envdproxy.Locator
		id     string
		wantOK bool
	}{
		{inDefault, "sb_aaaa", true},
		{inDefault, "sb-aaaa", true}, // either spelling
		{inDefault, "sb_bbbb", false},
		{inDefault, "sb_cccc", false}, // no claim reference, no namespace
		{everywhere, "sb_bbbb", true},
		{everywhere, "sb_cccc", true},
		{everywhere, "sb_dddd", false},
	} {
		addr, ok := c.loc.Owner(c.id)
		if ok != c.wantOK || (ok && addr != "10.0.0.1:7777") {
			t.Errorf("Owner(%s) = %q, %v; want ok=%v", c.id, addr, ok, c.wantOK)
		}
	}
	// Nodes is every fresh node with an address, whatever the namespace.
	for _, loc := range []envdproxy.Locator{inDefault, everywhere} {
		if got := loc.Nodes(); !slices.Equal(got, []string{"10.0.0.1:7777", "10.0.0.2:7777"}) {
			t.Errorf("Nodes() = %v", got)
		}
	}
}

func TestLocatorDropsStaleNodes(t *testing.T) {
	h := inventorytest.Start(t, inventorytest.Options{StaleAfter: time.Minute})
	now := time.Now()
	loc := inventorylocator.New(h.Store, "")
	// Alone, the old node is the newest publish and so fresh.
	h.Publish(inventorytest.FromSnapshot(node.Snapshot{Node: "old", Address: "10.0.0.2:7777", Entries: []node.EntrySnapshot{
		entry("sb_dead", "default/d", "10.0.0.2:7777"),
	}}, now.Add(-10*time.Minute)))
	h.Eventually("old node located", func() bool { _, ok := loc.Owner("sb_dead"); return ok })
	// A node publishing ten minutes later makes it stale.
	h.Publish(inventorytest.FromSnapshot(node.Snapshot{Node: "live", Address: "10.0.0.1:7777"}, now))
	h.Eventually("old node dropped", func() bool { _, ok := loc.Owner("sb_dead"); return !ok })
	if got := loc.Nodes(); !slices.Equal(got, []string{"10.0.0.1:7777"}) {
		t.Fatalf("Nodes() = %v, want only the fresh node", got)
	}
}

// TestProxyOverInventory runs the proxy on the informer-fed locator in
// front of a simulated fleet whose nodes publish their snapshots.
func TestProxyOverInventory(t *testing.T) {
	secret := []byte("secret")
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 2, RootToken: "root", Pools: []sandboxd.PoolSpec{{Template: "base", Warm: 1}}, RefillDelay: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	root, _ := sandboxd.New(f.Node(1).Addr(), sandboxd.WithToken("root"))
	cl, err := root.Claim(context.Background(), sandboxd.ClaimRequest{Template: "base", ClaimRef: "team/x", NoRedirect: true})
	if err != nil {
		t.Fatal(err)
	}
	h := inventorytest.Start(t, inventorytest.Options{})
	for _, n := range f.Nodes() {
		h.Publish(inventorytest.FromSnapshot(n.Snapshot(), time.Now()))
	}
	loc := inventorylocator.New(h.Store, "team")
	h.Eventually("sandbox indexed", func() bool { _, ok := loc.Owner(cl.ID); return ok })

	p, err := envdproxy.New(envdproxy.Config{Locator: loc, Domain: "sb.test", Secret: secret, Token: "root"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(p)
	t.Cleanup(srv.Close)
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(cl.Token))
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/hello", nil)
	req.Host = "8080-" + strings.Replace(cl.ID, "_", "-", 1) + ".sb.test"
	req.Header.Set("X-Access-Token", hex.EncodeToString(mac.Sum(nil)))
	before := f.Node(0).Counters().SandboxGets
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"path":"/hello"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if d := f.Node(0).Counters().SandboxGets - before; d != 0 {
		t.Fatalf("a published sandbox made the proxy ask another node (%d lookups)", d)
	}
}
