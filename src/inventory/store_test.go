package inventory_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func stamp(t time.Time) *metav1.Time { mt := metav1.NewTime(t); return &mt }

func inv(node string, published time.Time, entries ...v1beta1.InventoryEntry) *v1beta1.NodeInventory {
	i := &v1beta1.NodeInventory{Node: node, Address: "127.0.0.1:7" + node[len(node)-1:] + "00", Entries: entries}
	i.Name = node
	if !published.IsZero() {
		i.PublishedAt = stamp(published)
	}
	i.Pools = []v1beta1.PoolCapacity{{Template: "base", Net: "none", Size: "small", Warm: 3, Target: 4}}
	return i
}

func entry(ref, id string, phase v1beta1.SandboxPhase) v1beta1.InventoryEntry {
	name := ref
	if name == "" {
		name = id
	}
	return v1beta1.InventoryEntry{
		Name: name, Phase: phase, ID: id, ClaimRef: ref, Template: "base",
		Deadline: stamp(t0.Add(5 * time.Minute)), ClaimedAt: stamp(t0),
	}
}

// recorder collects changes as a subscriber sees them.
type recorder struct {
	mu      sync.Mutex
	changes []inventory.Change
}

func (r *recorder) add(c inventory.Change) {
	r.mu.Lock()
	r.changes = append(r.changes, c)
	r.mu.Unlock()
}

// take returns and forgets the changes seen so far, as "TYPE name" strings
// sorted (one store event's changes have no defined order among nodes).
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.changes))
	for _, c := range r.changes {
		out = append(out, string(c.Type)+" "+c.Entry.Name)
	}
	r.changes = nil
	slices.Sort(out)
	return out
}

func (r *recorder) waitFor(t *testing.T, want ...string) {
	t.Helper()
	slices.Sort(want)
	var got []string
	inventorytest.Eventually(t, fmt.Sprintf("changes %v", want), func() bool {
		got = append(got, r.take()...)
		slices.Sort(got)
		return len(got) >= len(want)
	})
	if !slices.Equal(got, want) {
		t.Fatalf("changes = %v, want %v", got, want)
	}
}

func start(t *testing.T, clk *clocktesting.FakeClock) (*inventorytest.Harness, *recorder) {
	rec := &recorder{}
	h := inventorytest.Start(t, inventorytest.Options{
		StaleAfter: 90 * time.Second, Resync: time.Second, Clock: clk,
		BeforeRun: func(s *inventory.Store) { s.Subscribe(rec.add) },
	})
	return h, rec
}

func nodeNames(s *inventory.Store) []string {
	var out []string
	for _, n := range s.Nodes() {
		out = append(out, n.Name)
	}
	return out
}

func TestStoreLookups(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h, rec := start(t, clk)

	fork := v1beta1.InventoryEntry{Name: "team-a/web-fork-sb_cc01", Phase: v1beta1.SandboxPhaseRunning, ID: "sb_cc01", ClaimRef: "team-a/web-fork-sb_cc01"}
	h.Publish(inv("node-1", t0,
		entry("team-a/web", "sb_aa01", v1beta1.SandboxPhaseRunning),
		entry("team-b/db", "sb_aa02", v1beta1.SandboxPhaseHibernated),
		entry("", "sb_aa03", v1beta1.SandboxPhaseRunning),          // no claim ref
		entry("not a ref", "sb_aa04", v1beta1.SandboxPhaseRunning), // unusable claim ref
		fork,
	))
	h.Publish(inv("node-2", t0, entry("team-a/api", "sb_bb01", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "ADDED team-a/web", "ADDED team-b/db", "ADDED sb_aa03", "ADDED not a ref",
		"ADDED team-a/web-fork-sb_cc01", "ADDED team-a/api")

	e, ok := h.Store.ByClaimRef("team-a", "web")
	if !ok || e.ID != "sb_aa01" || e.DNSID != "sb-aa01" || e.Node != "node-1" || e.Address != "127.0.0.1:7100" {
		t.Fatalf("ByClaimRef(team-a/web) = %+v, %v", e, ok)
	}
	if !e.Deadline.Equal(t0.Add(5*time.Minute)) || !e.ClaimedAt.Equal(t0) || e.Template != "base" {
		t.Fatalf("entry times/template not carried: %+v", e)
	}
	if _, ok := h.Store.ByClaimRef("team-b", "web"); ok {
		t.Fatal("a claim ref matched in the wrong namespace")
	}
	// A fork child is addressed by its hyphenated name, and by the
	// underscore spelling sandboxd recorded.
	for _, name := range []string{"web-fork-sb-cc01", "web-fork-sb_cc01"} {
		if e, ok := h.Store.ByClaimRef("team-a", name); !ok || e.ID != "sb_cc01" || e.ObjectName != "web-fork-sb-cc01" {
			t.Fatalf("ByClaimRef(team-a, %s) = %+v, %v", name, e, ok)
		}
	}

	for _, id := range []string{"sb_aa02", "sb-aa02"} {
		if e, ok := h.Store.ByID(id, ""); !ok || e.Name != "team-b/db" || e.Phase != v1beta1.SandboxPhaseHibernated {
			t.Fatalf("ByID(%s) = %+v, %v", id, e, ok)
		}
		if _, ok := h.Store.ByID(id, "team-b"); !ok {
			t.Fatalf("ByID(%s, team-b) missed", id)
		}
		if _, ok := h.Store.ByID(id, "team-a"); ok {
			t.Fatalf("ByID(%s, team-a) matched a sandbox of team-b", id)
		}
	}
	// A claim without a reference is found by id in any namespace only.
	if e, ok := h.Store.ByID("sb-aa03", ""); !ok || e.Namespace != "" {
		t.Fatalf("ByID(sb-aa03) = %+v, %v", e, ok)
	}
	if _, ok := h.Store.ByID("sb_aa03", "team-a"); ok {
		t.Fatal("a claim without a reference matched a namespace filter")
	}
	for _, bad := range []string{"", "aa01", "sb_", "sb_aa01/x"} {
		if _, ok := h.Store.ByID(bad, ""); ok {
			t.Fatalf("ByID(%q) matched", bad)
		}
	}

	keys := func(list []inventory.Entry) []string {
		var out []string
		for _, e := range list {
			out = append(out, e.Key())
		}
		return out
	}
	if got, want := keys(h.Store.List("")), []string{"team-a/api", "team-a/web", "team-a/web-fork-sb-cc01", "team-b/db"}; !slices.Equal(got, want) {
		t.Fatalf("List(all) = %v, want %v", got, want)
	}
	if got, want := keys(h.Store.List("team-a")), []string{"team-a/api", "team-a/web", "team-a/web-fork-sb-cc01"}; !slices.Equal(got, want) {
		t.Fatalf("List(team-a) = %v, want %v", got, want)
	}
	if got := h.Store.List("nobody"); len(got) != 0 {
		t.Fatalf("List(nobody) = %v", got)
	}

	nodes := h.Store.Nodes()
	if len(nodes) != 2 || nodes[0].Name != "node-1" || nodes[0].Entries != 5 || !nodes[0].PublishedAt.Equal(t0) {
		t.Fatalf("Nodes() = %+v", nodes)
	}
	if p := nodes[1].Pools; len(p) != 1 || p[0].Warm != 3 || p[0].Target != 4 || p[0].Template != "base" {
		t.Fatalf("node-2 pools = %+v", p)
	}

	// A republish with one entry gone, one changed, one unchanged.
	h.Publish(inv("node-1", t0.Add(30*time.Second),
		entry("team-a/web", "sb_aa01", v1beta1.SandboxPhaseHibernated),
		entry("", "sb_aa03", v1beta1.SandboxPhaseRunning),
		entry("not a ref", "sb_aa04", v1beta1.SandboxPhaseRunning),
		fork,
	))
	rec.waitFor(t, "MODIFIED team-a/web", "DELETED team-b/db")
	if _, ok := h.Store.ByID("sb_aa02", ""); ok {
		t.Fatal("a released sandbox is still found by id")
	}
	if got := keys(h.Store.List("team-b")); len(got) != 0 {
		t.Fatalf("List(team-b) after release = %v", got)
	}
	if e, _ := h.Store.ByClaimRef("team-a", "web"); e.Phase != v1beta1.SandboxPhaseHibernated {
		t.Fatalf("phase not updated: %+v", e)
	}

	h.Delete("node-2")
	rec.waitFor(t, "DELETED team-a/api")
	if got := nodeNames(h.Store); !slices.Equal(got, []string{"node-1"}) {
		t.Fatalf("nodes after delete = %v", got)
	}
}

func TestStoreFreshness(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h, rec := start(t, clk)

	h.Publish(inv("node-1", t0, entry("ns/one", "sb_01", v1beta1.SandboxPhaseRunning)))
	h.Publish(inv("node-2", t0, entry("ns/two", "sb_02", v1beta1.SandboxPhaseRunning)))
	h.Publish(inv("node-3", time.Time{}, entry("ns/three", "sb_03", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "ADDED ns/one", "ADDED ns/two")
	if got := nodeNames(h.Store); !slices.Equal(got, []string{"node-1", "node-2"}) {
		t.Fatalf("fresh nodes = %v: an unstamped inventory must be stale once others stamp", got)
	}

	// Everyone stops publishing: the clock moves on, the fleet stays.
	// A republish with the same stamp re-applies the rule at the new time.
	clk.Step(10 * time.Minute)
	h.Publish(inv("node-1", t0, entry("ns/one", "sb_01", v1beta1.SandboxPhaseRunning), entry("ns/marker", "sb_09", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "ADDED ns/marker")
	if got := nodeNames(h.Store); !slices.Equal(got, []string{"node-1", "node-2"}) {
		t.Fatalf("fresh nodes after an outage = %v", got)
	}

	// node-2 publishes again: node-1 now trails by more than the window.
	h.Publish(inv("node-2", t0.Add(10*time.Minute), entry("ns/two", "sb_02", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "DELETED ns/one", "DELETED ns/marker")
	if _, ok := h.Store.ByClaimRef("ns", "one"); ok {
		t.Fatal("a stale node's sandbox is still served")
	}
	if _, ok := h.Store.ByID("sb-01", ""); ok {
		t.Fatal("a stale node's sandbox is still found by id")
	}

	// node-1 comes back.
	h.Publish(inv("node-1", t0.Add(10*time.Minute+5*time.Second), entry("ns/one", "sb_01", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "ADDED ns/one")
	if got := nodeNames(h.Store); !slices.Equal(got, []string{"node-1", "node-2"}) {
		t.Fatalf("fresh nodes after node-1 returned = %v", got)
	}
}

// TestStoreNodeAheadAndTime: a node whose clock runs ahead cannot evict the
// rest, and as the process clock catches up the others age out by the
// passage of time alone, noticed by the resync ticker.
func TestStoreNodeAheadAndTime(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h, rec := start(t, clk)

	h.Publish(inv("node-1", t0.Add(time.Hour), entry("ns/ahead", "sb_01", v1beta1.SandboxPhaseRunning)))
	h.Publish(inv("node-2", t0.Add(-30*time.Second), entry("ns/normal", "sb_02", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "ADDED ns/ahead", "ADDED ns/normal")

	// 59 s later node-2 is 89 s behind the capped newest: still fresh.
	// (node-1 republishes its stamp with one more entry, so the rule is
	// known to have been applied at the new time.)
	clk.Step(59 * time.Second)
	h.Publish(inv("node-1", t0.Add(time.Hour), entry("ns/ahead", "sb_01", v1beta1.SandboxPhaseRunning), entry("ns/marker", "sb_09", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "ADDED ns/marker")
	if got := nodeNames(h.Store); !slices.Equal(got, []string{"node-1", "node-2"}) {
		t.Fatalf("fresh nodes at +59s = %v", got)
	}
	// Two more seconds with no publish at all: node-2 trails by 91 s.
	clk.Step(2 * time.Second)
	rec.waitFor(t, "DELETED ns/normal")
	if got := nodeNames(h.Store); !slices.Equal(got, []string{"node-1"}) {
		t.Fatalf("fresh nodes at +61s = %v", got)
	}
}

func TestStoreNobodyStamps(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h, rec := start(t, clk)
	h.Publish(inv("node-1", time.Time{}, entry("ns/one", "sb_01", v1beta1.SandboxPhaseRunning)))
	h.Publish(inv("node-2", time.Time{}, entry("ns/two", "sb_02", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "ADDED ns/one", "ADDED ns/two")
	clk.Step(time.Hour)
	if got := nodeNames(h.Store); !slices.Equal(got, []string{"node-1", "node-2"}) {
		t.Fatalf("fresh nodes = %v", got)
	}
	// The first stamp makes every unstamped inventory stale.
	h.Publish(inv("node-2", t0.Add(time.Hour), entry("ns/two", "sb_02", v1beta1.SandboxPhaseRunning)))
	rec.waitFor(t, "DELETED ns/one")
}

func TestStoreDuplicateClaimRef(t *testing.T) {
	clk := clocktesting.NewFakeClock(t0)
	h, rec := start(t, clk)
	older := entry("ns/dup", "sb_01", v1beta1.SandboxPhaseRunning)
	newer := entry("ns/dup", "sb_02", v1beta1.SandboxPhaseRunning)
	newer.ClaimedAt = stamp(t0.Add(time.Second))
	h.Publish(inv("node-1", t0, newer))
	h.Publish(inv("node-2", t0, older))
	rec.waitFor(t, "ADDED ns/dup", "ADDED ns/dup")
	if e, _ := h.Store.ByClaimRef("ns", "dup"); e.ID != "sb_02" {
		t.Fatalf("ByClaimRef picked %s, want the most recent claim sb_02", e.ID)
	}
	if got := h.Store.List("ns"); len(got) != 1 || got[0].ID != "sb_02" {
		t.Fatalf("List listed %+v, want one entry", got)
	}
	if all := h.Store.AllByClaimRef("ns", "dup"); len(all) != 2 || all[0].ID != "sb_02" || all[1].ID != "sb_01" {
		t.Fatalf("AllByClaimRef = %+v, want sb_02 then sb_01", all)
	}
	if all := h.Store.AllByClaimRef("ns", "none"); all != nil {
		t.Fatalf("AllByClaimRef of an unknown name = %+v", all)
	}
	h.Delete("node-1")
	rec.waitFor(t, "DELETED ns/dup")
	if e, ok := h.Store.ByClaimRef("ns", "dup"); !ok || e.ID != "sb_01" {
		t.Fatalf("after node-1 left, ByClaimRef = %+v, %v", e, ok)
	}
}
