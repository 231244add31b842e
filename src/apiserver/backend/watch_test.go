package backend

import (
	"context"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func nodeInv(node string, published time.Time, entries ...v1beta1.InventoryEntry) *v1beta1.NodeInventory {
	inv := &v1beta1.NodeInventory{Node: node, Address: "127.0.0.1:1", Entries: entries}
	inv.Name = node
	inv.PublishedAt = timePtr(published)
	return inv
}

func invEntry(ref, id string, phase v1beta1.SandboxPhase) v1beta1.InventoryEntry {
	return v1beta1.InventoryEntry{
		Name: ref, ClaimRef: ref, ID: id, Phase: phase, Template: "base",
		Deadline: timePtr(t0.Add(time.Hour)), ClaimedAt: timePtr(t0),
	}
}

func next(t *testing.T, ch <-chan registry.Event) registry.Event {
	t.Helper()
	select {
	case ev, ok := <-ch:
		if !ok {
			t.Fatal("watch channel closed")
		}
		return ev
	case <-time.After(20 * time.Second):
		t.Fatal("no watch event")
	}
	return registry.Event{}
}

func expect(t *testing.T, ch <-chan registry.Event, typ registry.EventType, key string) registry.Event {
	t.Helper()
	ev := next(t, ch)
	if got := ev.Sandbox.Namespace + "/" + ev.Sandbox.Name; ev.Type != typ || got != key {
		t.Fatalf("event %s %s, want %s %s", ev.Type, got, typ, key)
	}
	if ev.Sandbox.ResourceVersion != fmt.Sprint(ev.Revision) && ev.Revision != 0 {
		t.Fatalf("event revision %d but object resourceVersion %s", ev.Revision, ev.Sandbox.ResourceVersion)
	}
	return ev
}

func TestWatchFollowsInventory(t *testing.T) {
	svc, h, clk := storeOnly(t, Config{})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	h.Publish(nodeInv("node-1", t0, invEntry("ns/a", "sb_a1", v1beta1.SandboxPhaseRunning)))
	h.Eventually("ns/a to be served", func() bool { _, err := svc.Get(ctx, "ns", "a"); return err == nil })

	all, err := svc.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := svc.Watch(ctx, "other", 0)
	if err != nil {
		t.Fatal(err)
	}
	expect(t, all, registry.Added, "ns/a") // synthetic, for the existing sandbox

	h.Publish(nodeInv("node-2", t0, invEntry("other/b", "sb_b1", v1beta1.SandboxPhaseRunning)))
	added := expect(t, all, registry.Added, "other/b")
	expect(t, other, registry.Added, "other/b")

	h.Publish(nodeInv("node-1", t0.Add(30*time.Second), invEntry("ns/a", "sb_a1", v1beta1.SandboxPhaseHibernated)))
	mod := expect(t, all, registry.Modified, "ns/a")
	if mod.Sandbox.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
		t.Fatalf("modified object is not suspended: %s", mod.Sandbox.Spec.OperatingMode)
	}

	// node-2 publishes 200 s later; node-1 last published 170 s before
	// that, past the 90 s window: its sandbox leaves.
	clk.Step(200 * time.Second)
	h.Publish(nodeInv("node-2", t0.Add(200*time.Second), invEntry("other/b", "sb_b1", v1beta1.SandboxPhaseRunning)))
	del := expect(t, all, registry.Deleted, "ns/a")
	if del.Sandbox.Annotations[sandbox.AnnotationID] != "sb_a1" {
		t.Fatalf("deleted event carries %v", del.Sandbox.Annotations)
	}
	if _, err := svc.Get(ctx, "ns", "a"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a stale node's sandbox = %v", err)
	}
	// node-1 publishes again and its sandbox returns.
	h.Publish(nodeInv("node-1", t0.Add(201*time.Second), invEntry("ns/a", "sb_a1", v1beta1.SandboxPhaseRunning)))
	expect(t, all, registry.Added, "ns/a")

	// The namespaced watch saw none of ns's events; a later one in its
	// namespace arrives next.
	h.Publish(nodeInv("node-2", t0.Add(202*time.Second)))
	expect(t, other, registry.Deleted, "other/b")
	expect(t, all, registry.Deleted, "other/b")

	// Resuming after the first other/b event replays what followed.
	resumed, err := svc.Watch(ctx, "", added.Revision)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []struct {
		typ registry.EventType
		key string
	}{{registry.Modified, "ns/a"}, {registry.Deleted, "ns/a"}, {registry.Added, "ns/a"}, {registry.Deleted, "other/b"}} {
		expect(t, resumed, want.typ, want.key)
	}

	_, rev, _ := svc.List(ctx, "")
	if _, err := svc.Watch(ctx, "", rev+100); !apierrors.IsResourceExpired(err) {
		t.Fatalf("Watch from a future revision = %v, want Expired", err)
	}

	cancel()
	for _, ch := range []<-chan registry.Event{all, other, resumed} {
		inventorytest.Eventually(t, "the watch to close", func() bool {
			select {
			case _, ok := <-ch:
				return !ok
			default:
				return false
			}
		})
	}
}

func TestWatchSeesOwnWrites(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := e.svc.Watch(ctx, "ns", 0)
	if err != nil {
		t.Fatal(err)
	}
	created, err := e.svc.Create(ctx, newSandbox("ns", "mine", "base"))
	if err != nil {
		t.Fatal(err)
	}
	ev := expect(t, w, registry.Added, "ns/mine")
	if ev.Sandbox.UID != created.UID || ev.Sandbox.ResourceVersion != created.ResourceVersion {
		t.Fatalf("registry.Added event %s@%s, create answered %s@%s", ev.Sandbox.UID, ev.Sandbox.ResourceVersion, created.UID, created.ResourceVersion)
	}
	if _, err := e.svc.Pause(ctx, "ns", "mine"); err != nil {
		t.Fatal(err)
	}
	expect(t, w, registry.Modified, "ns/mine")
	if _, err := e.svc.Delete(ctx, "ns", "mine"); err != nil {
		t.Fatal(err)
	}
	expect(t, w, registry.Deleted, "ns/mine")
	// The node publishing the release later is not a second delete.
	e.publish()
	select {
	case ev := <-w:
		t.Fatalf("unexpected event %s %s", ev.Type, ev.Sandbox.Name)
	default:
	}
}

func TestWatchExpiredAndSlow(t *testing.T) {
	svc, h, _ := storeOnly(t, Config{History: 4, WatchBuffer: 2})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	slow, err := svc.Watch(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	// One sandbox per publish, each seen before the next: publishes the
	// informer takes together come out as one change whose entries are in
	// no particular order, and this test counts events back from the end.
	var entries []v1beta1.InventoryEntry
	for i := range 8 {
		entries = append(entries, invEntry(fmt.Sprintf("ns/s%d", i), fmt.Sprintf("sb_%02d", i), v1beta1.SandboxPhaseRunning))
		h.Publish(nodeInv("node-1", t0, entries...))
		h.Eventually(fmt.Sprintf("%d sandboxes", i+1), func() bool { l, _, _ := svc.List(ctx, "ns"); return len(l) == i+1 })
	}

	// Only the last four events are held: resuming from 1 cannot be served.
	if _, err := svc.Watch(ctx, "", 1); !apierrors.IsResourceExpired(err) {
		t.Fatalf("Watch from an evicted revision = %v, want Expired", err)
	}
	_, rev, _ := svc.List(ctx, "")
	if w, err := svc.Watch(ctx, "", rev-3); err != nil {
		t.Fatalf("Watch from a held revision: %v", err)
	} else {
		expect(t, w, registry.Added, "ns/s5")
	}

	// The watcher that never read fell more than two events behind and
	// was dropped: its channel ends after what it had buffered.
	received := 0
	inventorytest.Eventually(t, "the slow watch to close", func() bool {
		select {
		case _, ok := <-slow:
			if ok {
				received++
			}
			return !ok
		case <-time.After(10 * time.Millisecond):
			return false
		}
	})
	if received >= 8 {
		t.Fatalf("slow watcher received all %d events; it should have been dropped", received)
	}
}

func TestConditionsByPhase(t *testing.T) {
	for _, tc := range []struct {
		phase     v1beta1.SandboxPhase
		ready     metav1.ConditionStatus
		reason    string
		mode      agentsv1beta1.SandboxOperatingMode
		suspended bool
	}{
		{v1beta1.SandboxPhaseRunning, metav1.ConditionTrue, agentsv1beta1.SandboxReasonDependenciesReady, agentsv1beta1.SandboxOperatingModeRunning, false},
		{v1beta1.SandboxPhaseHibernated, metav1.ConditionFalse, agentsv1beta1.SandboxReasonSuspended, agentsv1beta1.SandboxOperatingModeSuspended, true},
		{v1beta1.SandboxPhaseFailed, metav1.ConditionFalse, ReasonMachineFailed, agentsv1beta1.SandboxOperatingModeRunning, false},
		{"Archived", metav1.ConditionFalse, ReasonUnknownPhase, agentsv1beta1.SandboxOperatingModeRunning, false},
	} {
		v := view{}
		v.entry.Phase, v.entry.Node, v.entry.ID, v.entry.Namespace, v.entry.ObjectName = tc.phase, "n1", "sb_1", "ns", "x"
		sb := toSandbox(&v, 7)
		ready := condition(sb, agentsv1beta1.SandboxConditionReady)
		if ready == nil || ready.Status != tc.ready || ready.Reason != tc.reason || sb.Spec.OperatingMode != tc.mode {
			t.Errorf("%s: ready %+v mode %s", tc.phase, ready, sb.Spec.OperatingMode)
		}
		susp := condition(sb, agentsv1beta1.SandboxConditionSuspended)
		if (susp != nil && susp.Status == metav1.ConditionTrue) != tc.suspended {
			t.Errorf("%s: suspended condition %+v", tc.phase, susp)
		}
		if sb.ResourceVersion != "7" || sb.UID != uidFor("n1", "sb_1") {
			t.Errorf("%s: rv %s uid %s", tc.phase, sb.ResourceVersion, sb.UID)
		}
	}
}
