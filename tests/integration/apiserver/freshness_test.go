package apiserver_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// evictionWithin bounds how long a dead node's sandboxes stay listed: the
// stale window, one publish of the others to move the fleet's newest stamp
// on, the server's once-a-second re-check, and slack for a loaded machine.
const evictionWithin = staleAfter + 2*publishInterval + 15*time.Second

// TestFreshnessEviction kills a node that holds a sandbox and waits for
// the sandbox to leave the server's reads once the node's NodeInventory
// goes stale, while a sandbox on a live node stays.
func TestFreshnessEviction(t *testing.T) {
	e := sharedEnv(t)
	if !e.fleet.Alive(nodeVictim) {
		t.Skip("the victim node was killed by an earlier run in this process")
	}
	ctx := testContext(t)
	const ns = "freshness"

	doomed := e.mustCreate(ctx, t, newSandbox(ns, "doomed", withTemplate(templateVictim)))
	survivor := e.mustCreate(ctx, t, newSandbox(ns, "survivor", withTemplate(templateBase)))
	victim := e.nodeName(nodeVictim)
	if doomed.Status.NodeName != victim {
		t.Fatalf("doomed landed on %s, want %s, the only node with the %s pool", doomed.Status.NodeName, victim, templateVictim)
	}

	// Let both nodes publish the claims first, so what is listed comes
	// from inventory rather than from the server's memory of its writes.
	waitPublished(ctx, t, e, victim, doomed.Annotations[sandbox.AnnotationID])
	waitPublished(ctx, t, e, survivor.Status.NodeName, survivor.Annotations[sandbox.AnnotationID])

	// A watcher sees the eviction as a deletion.
	w, err := e.sandboxes.Namespace(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=doomed"})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()
	if ev := nextEvent(t, w, "doomed"); ev.Type != watch.Added {
		t.Fatalf("first event of a watch from now: %s, want ADDED for the existing sandbox", ev.Type)
	}

	if err := e.fleet.Kill(nodeVictim); err != nil {
		t.Fatalf("kill %s: %v", victim, err)
	}
	killed := time.Now()
	poll.UntilNil(t, "doomed to leave the list after its node died", func() error {
		listed, err := listNames(ctx, e.sandboxes, ns, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list %s %v after the kill: %v", ns, time.Since(killed).Round(time.Millisecond), err)
		}
		if !slices.Contains(listed, ns+"/survivor") {
			t.Errorf("%v after the kill: survivor, on a live node, left the list: %v", time.Since(killed).Round(time.Millisecond), listed)
		}
		if slices.Contains(listed, ns+"/doomed") {
			return fmt.Errorf("still listed %v after the kill (list %v)", time.Since(killed).Round(time.Millisecond), listed)
		}
		return nil
	})
	if took := time.Since(killed); took > evictionWithin {
		t.Errorf("doomed left the list %v after its node died, want within %v", took.Round(time.Millisecond), evictionWithin)
	} else {
		t.Logf("doomed left the list %v after its node died (stale after %v)", took.Round(time.Millisecond), staleAfter)
	}

	for {
		ev := nextEvent(t, w, "doomed")
		if ev.Type == watch.Modified {
			continue
		}
		if ev.Type != watch.Deleted {
			t.Errorf("watch event after the eviction: %s, want DELETED", ev.Type)
		}
		break
	}

	if _, err := e.getSandbox(ctx, t, ns, "doomed"); !apierrors.IsNotFound(err) {
		t.Errorf("get doomed after eviction: %v, want NotFound", err)
	}
	if _, err := e.getSandbox(ctx, t, ns, "survivor"); err != nil {
		t.Errorf("get survivor after eviction: %v", err)
	}
	// Eviction came from staleness: the dead node's object is still there.
	if _, err := e.cluster.Dynamic().Resource(v1beta1.NodeInventoryGVR).Get(ctx, victim, metav1.GetOptions{}); err != nil {
		t.Errorf("the dead node's NodeInventory: %v, want it left in place", err)
	}
	// No fresh node serves the victim's pool any more.
	checkNoCapacity(t, "a create for the dead node's template", e.createOnce(ctx, t, newSandbox(ns, "after", withTemplate(templateVictim))))
}

// waitPublished waits until node's NodeInventory lists the claim id.
func waitPublished(ctx context.Context, t *testing.T, e *testEnv, node, id string) {
	t.Helper()
	api := e.cluster.Dynamic().Resource(v1beta1.NodeInventoryGVR)
	poll.UntilNil(t, fmt.Sprintf("node %s to publish claim %s", node, id), func() error {
		u, err := api.Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("get node %s's NodeInventory: %v", node, err)
		}
		entries, _, err := unstructuredSlice(u.Object, "entries")
		if err != nil {
			t.Fatalf("node %s's NodeInventory entries: %v", node, err)
		}
		for _, en := range entries {
			if m, ok := en.(map[string]any); ok && m["id"] == id {
				return nil
			}
		}
		return fmt.Errorf("%d entries published, not it", len(entries))
	})
}
