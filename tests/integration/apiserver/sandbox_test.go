package apiserver_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// TestCreateGetListDelete covers the plain verbs through the aggregator:
// both ways of naming the pool, reads by name, by namespace, across
// namespaces and by selector, the conflict and not-found answers, and a
// delete that releases the VM on its node.
func TestCreateGetListDelete(t *testing.T) {
	e := sharedEnv(t)
	ctx := testContext(t)
	const nsA, nsB = "crud-a", "crud-b"

	byTemplate := e.mustCreate(ctx, t, newSandbox(nsA, "by-template", withTemplate(templateBase), withLabel("app", "web")))
	byImage := e.mustCreate(ctx, t, newSandbox(nsA, "by-image", withImage(imagePython)))
	other := e.mustCreate(ctx, t, newSandbox(nsB, "other", withTemplate(templateBase)))

	for _, sb := range []*agentsv1beta1.Sandbox{byTemplate, byImage, other} {
		checkServed(t, e, sb)
	}
	if got := byTemplate.Annotations[sandbox.AnnotationTemplate]; got != templateBase {
		t.Errorf("by-template: template annotation %q, want %q", got, templateBase)
	}
	if got := byImage.Annotations[sandbox.AnnotationTemplate]; got != imagePython {
		t.Errorf("by-image: template annotation %q, want the image %q", got, imagePython)
	}
	// Only the big nodes serve the image's pool.
	if n := byImage.Status.NodeName; n != e.nodeName(nodeBig1) && n != e.nodeName(nodeBig2) {
		t.Errorf("by-image landed on %q, which has no %s pool", n, imagePython)
	}

	got, err := e.getSandbox(ctx, t, nsA, "by-template")
	if err != nil {
		t.Fatalf("get: %v", err)
	}
	if got.UID != byTemplate.UID || got.Status.NodeName != byTemplate.Status.NodeName ||
		got.Annotations[sandbox.AnnotationID] != byTemplate.Annotations[sandbox.AnnotationID] {
		t.Errorf("get answered uid %s node %s id %s; create answered uid %s node %s id %s",
			got.UID, got.Status.NodeName, got.Annotations[sandbox.AnnotationID],
			byTemplate.UID, byTemplate.Status.NodeName, byTemplate.Annotations[sandbox.AnnotationID])
	}

	checkReadBack(ctx, t, e, byTemplate)

	all, err := listNames(ctx, e.sandboxes, "", metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list all namespaces: %v", err)
	}
	if want := []string{"crud-a/by-image", "crud-a/by-template", "crud-b/other"}; !slices.Equal(inNamespaces(all, nsA, nsB), want) {
		t.Errorf("list all namespaces: %v, want %v among them", all, want)
	}
	inA, err := listNames(ctx, e.sandboxes, nsA, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list %s: %v", nsA, err)
	}
	if want := []string{"crud-a/by-image", "crud-a/by-template"}; !slices.Equal(inA, want) {
		t.Errorf("list %s: %v, want %v", nsA, inA, want)
	}

	byName, err := listNames(ctx, e.sandboxes, "", metav1.ListOptions{FieldSelector: "metadata.name=by-image"})
	if err != nil {
		t.Fatalf("list by field selector: %v", err)
	}
	if want := []string{"crud-a/by-image"}; !slices.Equal(byName, want) {
		t.Errorf("fieldSelector metadata.name=by-image: %v, want %v", byName, want)
	}
	_, err = listNames(ctx, e.sandboxes, "", metav1.ListOptions{FieldSelector: "spec.replicas=1"})
	if !apierrors.IsBadRequest(err) {
		t.Errorf("list by an unsupported field selector: %v, want 400", err)
	}

	node := byImage.Status.NodeName
	onNode, err := e.sandboxes.List(ctx, metav1.ListOptions{LabelSelector: sandbox.LabelNode + "=" + node})
	if err != nil {
		t.Fatalf("list by node label: %v", err)
	}
	found := false
	for _, it := range onNode.Items {
		if l := it.GetLabels()[sandbox.LabelNode]; l != node {
			t.Errorf("label selector %s=%s returned %s/%s labelled %q", sandbox.LabelNode, node, it.GetNamespace(), it.GetName(), l)
		}
		found = found || (it.GetNamespace() == nsA && it.GetName() == "by-image")
	}
	if !found {
		t.Errorf("label selector %s=%s did not return crud-a/by-image", sandbox.LabelNode, node)
	}

	// A second create under a taken name spends nothing and is refused.
	before := e.claimed()
	_, err = e.createSandbox(ctx, t, newSandbox(nsA, "by-template", withTemplate(templateBase)))
	if !apierrors.IsAlreadyExists(err) {
		t.Errorf("duplicate create: %v, want AlreadyExists", err)
	}
	if after := e.claimed(); after != before {
		t.Errorf("duplicate create changed the fleet's claims from %d to %d", before, after)
	}

	if _, err := e.getSandbox(ctx, t, nsA, "no-such-sandbox"); !apierrors.IsNotFound(err) {
		t.Errorf("get unknown: %v, want NotFound", err)
	}
	// The name exists, but in another namespace.
	if _, err := e.getSandbox(ctx, t, nsB, "by-image"); !apierrors.IsNotFound(err) {
		t.Errorf("get by-image in %s: %v, want NotFound", nsB, err)
	}

	// Delete releases the VM on its node and the replica shows it gone at
	// once.
	id := byImage.Annotations[sandbox.AnnotationID]
	nodeIdx := e.nodeIndex(node)
	if _, ok := e.entry(nodeIdx, id); !ok {
		t.Fatalf("node %s does not hold by-image's claim %s", node, id)
	}
	if err := e.sandboxes.Namespace(nsA).Delete(ctx, "by-image", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if _, ok := e.entry(nodeIdx, id); ok {
		t.Errorf("node %s still holds claim %s after delete", node, id)
	}
	if _, err := e.getSandbox(ctx, t, nsA, "by-image"); !apierrors.IsNotFound(err) {
		t.Errorf("get after delete: %v, want NotFound", err)
	}
	inA, err = listNames(ctx, e.sandboxes, nsA, metav1.ListOptions{})
	if err != nil {
		t.Fatalf("list after delete: %v", err)
	}
	if want := []string{"crud-a/by-template"}; !slices.Equal(inA, want) {
		t.Errorf("list %s after delete: %v, want %v", nsA, inA, want)
	}
	if err := e.sandboxes.Namespace(nsA).Delete(ctx, "by-image", metav1.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("second delete: %v, want NotFound", err)
	}
}

// checkServed checks what a created Sandbox must carry: identity, the
// node and claim it is bound to (and that the node really holds it), the
// lease, and a running status.
func checkServed(t *testing.T, e *testEnv, sb *agentsv1beta1.Sandbox) {
	t.Helper()
	if sb.UID == "" || sb.CreationTimestamp.IsZero() || sb.ResourceVersion == "" {
		t.Errorf("%s: uid %q, creationTimestamp %v, resourceVersion %q: want all set", sb.Name, sb.UID, sb.CreationTimestamp, sb.ResourceVersion)
	}
	node := sb.Status.NodeName
	if node == "" || sb.Annotations[sandbox.AnnotationNode] != node || sb.Labels[sandbox.LabelNode] != node {
		t.Errorf("%s: status.nodeName %q, node annotation %q, node label %q: want one node name",
			sb.Name, node, sb.Annotations[sandbox.AnnotationNode], sb.Labels[sandbox.LabelNode])
	}
	idx := e.nodeIndex(node)
	if idx < 0 {
		t.Fatalf("%s: node %q is not in the fleet", sb.Name, node)
	}
	id := sb.Annotations[sandbox.AnnotationID]
	en, ok := e.entry(idx, id)
	if !ok {
		t.Fatalf("%s: node %s holds no claim %q", sb.Name, node, id)
	}
	if want := sb.Namespace + "/" + sb.Name; en.ClaimRef != want {
		t.Errorf("%s: claim %s has claim_ref %q, want %q", sb.Name, id, en.ClaimRef, want)
	}
	if d := deadlineOf(t, sb); d.Before(time.Now()) {
		t.Errorf("%s: deadline %v already passed", sb.Name, d)
	}
	if sb.Spec.ShutdownTime == nil {
		t.Errorf("%s: no spec.shutdownTime in the answer", sb.Name)
	}
	if c, ok := condition(sb, "Ready"); !ok || c.Status != metav1.ConditionTrue {
		t.Errorf("%s: Ready condition %+v, want True", sb.Name, c)
	}
}

// checkReadBack waits until the server serves created from its node's
// inventory rather than from its memory of the create (the client's own
// label is then gone, since nothing stores it) and checks that the sandbox
// kept its identity, node, claim and lease across that hand-over.
func checkReadBack(ctx context.Context, t *testing.T, e *testEnv, created *agentsv1beta1.Sandbox) {
	t.Helper()
	var got *agentsv1beta1.Sandbox
	poll.UntilNil(t, created.Name+" to be served from inventory, not from the create's memory", func() error {
		var err error
		got, err = e.getSandbox(ctx, t, created.Namespace, created.Name)
		if err != nil {
			t.Fatalf("get %s: %v", created.Name, err)
		}
		if app, echoed := got.Labels["app"]; echoed {
			return fmt.Errorf("still served with the create's label app=%q", app)
		}
		return nil
	})
	for _, k := range []string{sandbox.AnnotationID, sandbox.AnnotationNode, sandbox.AnnotationTemplate, sandbox.AnnotationDeadline} {
		if got.Annotations[k] != created.Annotations[k] {
			t.Errorf("%s read back from inventory: %s = %q, the create answered %q", created.Name, k, got.Annotations[k], created.Annotations[k])
		}
	}
	if got.UID != created.UID || got.Status.NodeName != created.Status.NodeName || got.Labels[sandbox.LabelNode] != created.Labels[sandbox.LabelNode] {
		t.Errorf("%s read back from inventory: uid %s node %s label %q; the create answered uid %s node %s label %q",
			created.Name, got.UID, got.Status.NodeName, got.Labels[sandbox.LabelNode], created.UID, created.Status.NodeName, created.Labels[sandbox.LabelNode])
	}
	if d := got.CreationTimestamp.Sub(created.CreationTimestamp.Time); d < -2*time.Second || d > 2*time.Second {
		t.Errorf("%s read back from inventory: created %v, the create answered %v", created.Name, got.CreationTimestamp, created.CreationTimestamp)
	}
	if c, ok := condition(got, "Ready"); !ok || c.Status != metav1.ConditionTrue {
		t.Errorf("%s read back from inventory: Ready condition %+v, want True", created.Name, c)
	}
}

// TestWatch opens a watch before a create and sees the sandbox come and
// go.
func TestWatch(t *testing.T) {
	e := sharedEnv(t)
	ctx := testContext(t)
	const ns, name = "watch", "watched"

	w, err := e.sandboxes.Namespace(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatalf("watch: %v", err)
	}
	defer w.Stop()

	created := e.mustCreate(ctx, t, newSandbox(ns, name, withTemplate(templateBase)))
	ev := nextEvent(t, w, name)
	if ev.Type != watch.Added {
		t.Fatalf("first event for %s: %s, want ADDED", name, ev.Type)
	}
	if uid := eventUID(t, ev); uid != string(created.UID) {
		t.Errorf("ADDED carries uid %s, the create answered %s", uid, created.UID)
	}

	if err := e.sandboxes.Namespace(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	// Bookmarks and a MODIFIED (the node's first publish of the claim)
	// may come between; the next ADDED or DELETED must be the delete.
	for {
		ev = nextEvent(t, w, name)
		if ev.Type == watch.Modified {
			continue
		}
		break
	}
	if ev.Type != watch.Deleted {
		t.Fatalf("event after delete: %s, want DELETED", ev.Type)
	}
	if uid := eventUID(t, ev); uid != string(created.UID) {
		t.Errorf("DELETED carries uid %s, want %s", uid, created.UID)
	}
}

// nextEvent returns the next event about the named sandbox, skipping
// bookmarks, and fails the test on an error event, a closed watch or the
// test's deadline.
func nextEvent(t *testing.T, w watch.Interface, name string) watch.Event {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("the watch closed")
			}
			switch ev.Type {
			case watch.Bookmark:
				continue
			case watch.Error:
				t.Fatalf("watch error: %v", apierrors.FromObject(ev.Object))
			}
			obj, ok := ev.Object.(metav1.Object)
			if !ok {
				t.Fatalf("watch event %s carries %T", ev.Type, ev.Object)
			}
			if obj.GetName() != name {
				t.Fatalf("watch with fieldSelector metadata.name=%s delivered %s", name, obj.GetName())
			}
			return ev
		case <-timeout:
			t.Fatalf("no watch event for %s within %v", name, waitTimeout)
		}
	}
}

func eventUID(t *testing.T, ev watch.Event) string {
	t.Helper()
	obj, ok := ev.Object.(metav1.Object)
	if !ok {
		t.Fatalf("watch event carries %T", ev.Object)
	}
	return string(obj.GetUID())
}
