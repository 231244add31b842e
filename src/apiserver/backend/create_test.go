package backend

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func TestCreateGetListDelete(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2, warm: []int{3, 1}})
	ctx := context.Background()

	in := newSandbox("team-a", "web", "base")
	in.Labels = map[string]string{"app": "web"}
	got, err := e.svc.Create(ctx, in)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	live, nodeName, ok := e.entry("team-a/web")
	if !ok {
		t.Fatal("no claim with claim_ref team-a/web on the fleet")
	}
	if nodeName != "sim-node-0" {
		t.Fatalf("claimed on %s, want the warmest node sim-node-0", nodeName)
	}
	// The answer is complete: nobody needs to poll.
	if got.Namespace != "team-a" || got.Name != "web" || got.Labels["app"] != "web" {
		t.Fatalf("identity/labels not echoed: %+v", got.ObjectMeta)
	}
	if got.UID != uidFor(nodeName, live.ID) || got.CreationTimestamp.IsZero() || got.ResourceVersion == "" {
		t.Fatalf("uid/creationTimestamp/resourceVersion not filled: %+v", got.ObjectMeta)
	}
	wantAnn := map[string]string{
		sandbox.AnnotationNode: nodeName, sandbox.AnnotationID: live.ID, sandbox.AnnotationTemplate: "base",
		sandbox.AnnotationNet: "none", sandbox.AnnotationSize: "small", sandbox.AnnotationDeadline: live.Deadline.UTC().Format(time.RFC3339),
	}
	for k, v := range wantAnn {
		if got.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], v)
		}
	}
	if got.Labels[sandbox.LabelNode] != nodeName || got.Status.NodeName != nodeName {
		t.Errorf("node label/status = %q/%q", got.Labels[sandbox.LabelNode], got.Status.NodeName)
	}
	if got.Spec.ShutdownTime == nil || !got.Spec.ShutdownTime.Time.Equal(live.Deadline) {
		t.Errorf("shutdownTime = %v, want the granted deadline %v", got.Spec.ShutdownTime, live.Deadline)
	}
	if c := condition(got, agentsv1beta1.SandboxConditionReady); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Ready = %+v, want True", c)
	}

	// Before the node publishes, this replica still serves what it created.
	if g, err := e.svc.Get(ctx, "team-a", "web"); err != nil || g.UID != got.UID || g.Labels["app"] != "web" {
		t.Fatalf("Get before publish = %v, %v", g, err)
	}
	if list, _, _ := e.svc.List(ctx, "team-a"); len(list) != 1 || list[0].Name != "web" {
		t.Fatalf("List before publish = %d items", len(list))
	}
	if list, _, _ := e.svc.List(ctx, "team-b"); len(list) != 0 {
		t.Fatalf("List(team-b) = %d items", len(list))
	}

	// After it publishes the inventory serves the same object identity.
	e.publish()
	g, err := e.svc.Get(ctx, "team-a", "web")
	if err != nil || g.UID != got.UID || g.Annotations[sandbox.AnnotationID] != live.ID {
		t.Fatalf("Get after publish = %v, %v", g, err)
	}

	if _, err := e.svc.Create(ctx, newSandbox("team-a", "web", "base")); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second Create = %v, want AlreadyExists", err)
	}
	// The same name in another namespace is another sandbox.
	if _, err := e.svc.Create(ctx, newSandbox("team-b", "web", "base")); err != nil {
		t.Fatalf("Create team-b/web: %v", err)
	}

	del, err := e.svc.Delete(ctx, "team-a", "web")
	if err != nil || del.UID != got.UID {
		t.Fatalf("Delete = %v, %v", del, err)
	}
	if _, _, ok := e.entry("team-a/web"); ok {
		t.Fatal("the node still holds the deleted sandbox")
	}
	// Gone at once on this replica, though the inventory still lists it.
	if _, ok := e.inv.Store.ByClaimRef("team-a", "web"); !ok {
		t.Fatal("test premise: the inventory should not have caught up yet")
	}
	if _, err := e.svc.Get(ctx, "team-a", "web"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after Delete = %v, want NotFound", err)
	}
	if list, _, _ := e.svc.List(ctx, "team-a"); len(list) != 0 {
		t.Fatalf("List after Delete = %d items", len(list))
	}
	if _, err := e.svc.Delete(ctx, "team-a", "web"); !apierrors.IsNotFound(err) {
		t.Fatalf("second Delete = %v, want NotFound", err)
	}
	e.publish()
	if _, err := e.svc.Get(ctx, "team-a", "web"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after publish = %v, want NotFound", err)
	}
	if _, err := e.svc.Delete(ctx, "team-a", "nobody"); !apierrors.IsNotFound(err) {
		t.Fatalf("Delete of an unknown name = %v, want NotFound", err)
	}
	// The name is free again.
	if _, err := e.svc.Create(ctx, newSandbox("team-a", "web", "base")); err != nil {
		t.Fatalf("re-Create after Delete: %v", err)
	}
}

// TestDeleteReleasedElsewhere: a sandbox its node no longer holds answers
// NotFound and disappears from reads.
func TestDeleteReleasedElsewhere(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	ctx := context.Background()
	if _, err := e.svc.Create(ctx, newSandbox("ns", "gone", "base")); err != nil {
		t.Fatal(err)
	}
	e.publish()
	live, _, _ := e.entry("ns/gone")
	cl, _ := sandboxd.New(e.fleet.Node(0).Addr(), sandboxd.WithToken(rootToken))
	if err := cl.Release(ctx, live.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.svc.Delete(ctx, "ns", "gone"); !apierrors.IsNotFound(err) {
		t.Fatalf("Delete = %v, want NotFound", err)
	}
	if _, err := e.svc.Get(ctx, "ns", "gone"); !apierrors.IsNotFound(err) {
		t.Fatalf("Get = %v, want NotFound", err)
	}
}

func TestCreateFallsThroughToNextNode(t *testing.T) {
	// sim-node-0 is the warmest, so the first candidate, but already at
	// max_claims: it refuses with 429 and the claim lands on sim-node-1.
	e := newEnv(t, envOptions{nodes: 2, warm: []int{3, 1}, maxClaims: []int{1, 0}})
	ctx := context.Background()
	cl, _ := sandboxd.New(e.fleet.Node(0).Addr(), sandboxd.WithToken(rootToken))
	if _, err := cl.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: "base", NoRedirect: true}); err != nil {
		t.Fatal(err)
	}
	e.publish()
	refusedBefore := e.fleet.Node(0).Counters().Refused

	got, err := e.svc.Create(ctx, newSandbox("ns", "fall", "base"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got.Annotations[sandbox.AnnotationNode] != "sim-node-1" {
		t.Fatalf("claimed on %s, want sim-node-1", got.Annotations[sandbox.AnnotationNode])
	}
	if r := e.fleet.Node(0).Counters().Refused; r != refusedBefore+1 {
		t.Fatalf("sim-node-0 refused %d claims, want exactly one more (the node was asked first)", r-refusedBefore)
	}
	if _, n, ok := e.entry("ns/fall"); !ok || n != "sim-node-1" {
		t.Fatalf("live claim on %q, %v", n, ok)
	}
}

func TestCreateSkipsUnreachableNode(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2, warm: []int{3, 1}})
	// sim-node-0 dies after publishing: the inventory still lists it.
	if err := e.fleet.Kill(0); err != nil {
		t.Fatal(err)
	}
	got, err := e.svc.Create(context.Background(), newSandbox("ns", "skip", "base"))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got.Annotations[sandbox.AnnotationNode] != "sim-node-1" {
		t.Fatalf("claimed on %s, want sim-node-1", got.Annotations[sandbox.AnnotationNode])
	}
}

func TestCreateNoCapacity(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 2, maxClaims: []int{1, 1}})
	ctx := context.Background()
	for i := range 2 {
		cl, _ := sandboxd.New(e.fleet.Node(i).Addr(), sandboxd.WithToken(rootToken))
		if _, err := cl.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: "base", NoRedirect: true}); err != nil {
			t.Fatal(err)
		}
	}
	e.publish()
	before := e.claims()

	_, err := e.svc.Create(ctx, newSandbox("ns", "full", "base"))
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("Create on a full fleet = %v, want TooManyRequests", err)
	}
	if s, ok := apierrors.SuggestsClientDelay(err); !ok || s != DefaultRetryAfterSeconds {
		t.Fatalf("retry-after = %d, %v", s, ok)
	}
	// No pool anywhere for the template: refused without asking a node.
	_, err = e.svc.Create(ctx, newSandbox("ns", "other", "other-template"))
	if !apierrors.IsTooManyRequests(err) {
		t.Fatalf("Create for an unpooled template = %v, want TooManyRequests", err)
	}
	if strings.Contains(err.Error(), "127.0.0.1") {
		t.Fatalf("error leaks a node address: %v", err)
	}
	if got := e.claims(); got != before {
		t.Fatalf("claims went from %d to %d", before, got)
	}
	if _, err := e.svc.Get(ctx, "ns", "full"); !apierrors.IsNotFound(err) {
		t.Fatalf("a refused create is visible: %v", err)
	}
}

func TestCreateLease(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, warm: []int{4}})
	ctx := context.Background()
	now := e.clk.Now()

	// Accepted leases, as the node granted them (deadline - claimedAt).
	accepted := []struct {
		name string
		mut  func(*agentsv1beta1.Sandbox)
		want time.Duration
	}{
		{"shutdown-time", func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.ShutdownTime = timePtr(now.Add(90*time.Second + 200*time.Millisecond))
			sb.Annotations = map[string]string{sandbox.AnnotationTTLSeconds: "30"} // shutdownTime wins
		}, 91 * time.Second},
		{"ttl-annotation", func(sb *agentsv1beta1.Sandbox) {
			sb.Annotations = map[string]string{sandbox.AnnotationTTLSeconds: "120"}
		}, 120 * time.Second},
		{"node-default", func(sb *agentsv1beta1.Sandbox) {
			sb.Annotations = map[string]string{sandbox.AnnotationTTLSeconds: "0"}
		}, sandboxd.DefaultTTL},
	}
	for _, tc := range accepted {
		sb := newSandbox("ns", tc.name, "base")
		tc.mut(sb)
		if _, err := e.svc.Create(ctx, sb); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		live, _, ok := e.entry("ns/" + tc.name)
		if !ok {
			t.Fatalf("%s: no live claim", tc.name)
		}
		if got := live.Deadline.Sub(live.ClaimedAt); got != tc.want {
			t.Errorf("%s: lease %v, want %v", tc.name, got, tc.want)
		}
	}

	// Refused before any VM is spent.
	before := e.claims()
	refused := []struct {
		name string
		mut  func(*agentsv1beta1.Sandbox)
	}{
		{"past-shutdown", func(sb *agentsv1beta1.Sandbox) { sb.Spec.ShutdownTime = timePtr(now.Add(-time.Second)) }},
		{"now-shutdown", func(sb *agentsv1beta1.Sandbox) { sb.Spec.ShutdownTime = timePtr(e.clk.Now()) }},
		{"malformed-ttl", func(sb *agentsv1beta1.Sandbox) {
			sb.Annotations = map[string]string{sandbox.AnnotationTTLSeconds: "5m"}
		}},
		{"negative-ttl", func(sb *agentsv1beta1.Sandbox) {
			sb.Annotations = map[string]string{sandbox.AnnotationTTLSeconds: "-5"}
		}},
		{"malformed-ttl-with-shutdown", func(sb *agentsv1beta1.Sandbox) {
			sb.Spec.ShutdownTime = timePtr(now.Add(time.Hour))
			sb.Annotations = map[string]string{sandbox.AnnotationTTLSeconds: "soon"}
		}},
		{"no-template", func(sb *agentsv1beta1.Sandbox) { sb.Spec.PodTemplate.Spec.Containers = nil }},
		{"Bad_Name", func(*agentsv1beta1.Sandbox) {}},
	}
	for _, tc := range refused {
		sb := newSandbox("ns", tc.name, "base")
		tc.mut(sb)
		if _, err := e.svc.Create(ctx, sb); !apierrors.IsBadRequest(err) {
			t.Errorf("%s: Create = %v, want BadRequest", tc.name, err)
		}
	}
	if got := e.claims(); got != before {
		t.Fatalf("refused creates spent %d VMs", got-before)
	}
}

func TestCreatePoolKeyFromAnnotations(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	sb := newSandbox("ns", "annotated", "ignored-image")
	sb.Annotations = map[string]string{sandbox.AnnotationTemplate: "base", sandbox.AnnotationNet: "none", sandbox.AnnotationSize: "small"}
	got, err := e.svc.Create(context.Background(), sb)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if got.Annotations[sandbox.AnnotationTemplate] != "base" {
		t.Fatalf("template annotation = %q", got.Annotations[sandbox.AnnotationTemplate])
	}
	// A size no node pools is a capacity refusal, not a spent VM.
	sb = newSandbox("ns", "large", "base")
	sb.Annotations = map[string]string{sandbox.AnnotationSize: "large"}
	if _, err := e.svc.Create(context.Background(), sb); !apierrors.IsTooManyRequests(err) {
		t.Fatalf("Create for an unpooled size = %v, want TooManyRequests", err)
	}
}

// TestRecentWritesExpire: what this replica created is served until the
// inventory shows it or RecentTTL passes; past that only the inventory
// counts, so a sandbox its node has not published yet leaves reads until
// it does. MaxRecent bounds the writes kept.
func TestRecentWritesExpire(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, warm: []int{4}, cfg: Config{RecentTTL: 30 * time.Second, MaxRecent: 2}})
	ctx := context.Background()
	w, err := e.svc.Watch(ctx, "ns", 0)
	if err != nil {
		t.Fatal(err)
	}
	create := func(name string) {
		t.Helper()
		if _, err := e.svc.Create(ctx, newSandbox("ns", name, "base")); err != nil {
			t.Fatal(err)
		}
	}
	create("one")
	expect(t, w, "ADDED", "ns/one")
	e.clk.Step(time.Second) // so "one" is the oldest write
	create("two")
	expect(t, w, "ADDED", "ns/two")
	create("three") // past the cap of two: the oldest write goes
	expect(t, w, "DELETED", "ns/one")
	expect(t, w, "ADDED", "ns/three")
	if _, err := e.svc.Get(ctx, "ns", "one"); !apierrors.IsNotFound(err) {
		t.Fatalf("evicted write still served: %v", err)
	}

	// The inventory brings "one" back and replaces the written views of
	// the other two (node-stamped claim time, no client labels).
	e.publish()
	expectSet(t, w, "ADDED ns/one", "MODIFIED ns/two", "MODIFIED ns/three")
	inventorytest.Eventually(t, "overlays to settle", func() bool {
		e.svc.mu.Lock()
		defer e.svc.mu.Unlock()
		return len(e.svc.overlays) == 0
	})

	create("four")
	expect(t, w, "ADDED", "ns/four")
	e.clk.Step(31 * time.Second)
	expect(t, w, "DELETED", "ns/four")
	if _, err := e.svc.Get(ctx, "ns", "four"); !apierrors.IsNotFound(err) {
		t.Fatalf("an expired, unpublished write is still served: %v", err)
	}
	e.publish()
	expect(t, w, "ADDED", "ns/four")
	for _, name := range []string{"one", "two", "three", "four"} {
		if _, err := e.svc.Get(ctx, "ns", name); err != nil {
			t.Fatalf("Get %s after publish: %v", name, err)
		}
	}
}

// expectSet takes len(want) events and compares them to want in any order.
func expectSet(t *testing.T, ch <-chan registry.Event, want ...string) {
	t.Helper()
	var got []string
	for range want {
		ev := next(t, ch)
		got = append(got, string(ev.Type)+" "+ev.Sandbox.Namespace+"/"+ev.Sandbox.Name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}
