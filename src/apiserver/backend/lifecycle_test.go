package backend

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

func TestPauseResume(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	ctx := context.Background()
	if _, err := e.svc.Create(ctx, newSandbox("ns", "sleepy", "base")); err != nil {
		t.Fatal(err)
	}
	phase := func() string {
		live, _, _ := e.entry("ns/sleepy")
		return live.Phase
	}
	suspended := func(sb *agentsv1beta1.Sandbox) bool {
		ready := condition(sb, agentsv1beta1.SandboxConditionReady)
		return sb.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended &&
			ready != nil && ready.Status == metav1.ConditionFalse && ready.Reason == agentsv1beta1.SandboxReasonSuspended
	}

	for i := range 2 { // the second call checks idempotence
		got, err := e.svc.Pause(ctx, "ns", "sleepy")
		if err != nil {
			t.Fatalf("Pause #%d: %v", i+1, err)
		}
		if !suspended(got) || phase() != node.PhaseHibernated {
			t.Fatalf("Pause #%d: object suspended=%v, node phase %s", i+1, suspended(got), phase())
		}
	}
	// Reads show the pause before the node publishes it, and after.
	if g, _ := e.svc.Get(ctx, "ns", "sleepy"); !suspended(g) {
		t.Fatal("Get after Pause is not suspended")
	}
	e.publish()
	if g, _ := e.svc.Get(ctx, "ns", "sleepy"); !suspended(g) {
		t.Fatal("Get after publish is not suspended")
	}

	for i := range 2 {
		got, err := e.svc.Resume(ctx, "ns", "sleepy")
		if err != nil {
			t.Fatalf("Resume #%d: %v", i+1, err)
		}
		ready := condition(got, agentsv1beta1.SandboxConditionReady)
		if got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning || ready.Status != metav1.ConditionTrue || phase() != node.PhaseRunning {
			t.Fatalf("Resume #%d: mode %s ready %s node phase %s", i+1, got.Spec.OperatingMode, ready.Status, phase())
		}
	}
	if g, _ := e.svc.Get(ctx, "ns", "sleepy"); suspended(g) {
		t.Fatal("Get after Resume is still suspended (stale overlay or inventory)")
	}

	if _, err := e.svc.Pause(ctx, "ns", "nobody"); !apierrors.IsNotFound(err) {
		t.Fatalf("Pause unknown = %v", err)
	}
	if _, err := e.svc.Resume(ctx, "other", "sleepy"); !apierrors.IsNotFound(err) {
		t.Fatalf("Resume in the wrong namespace = %v", err)
	}
}

func TestFork(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	ctx := context.Background()
	parent, err := e.svc.Create(ctx, newSandbox("team", "web", "base"))
	if err != nil {
		t.Fatal(err)
	}
	children, err := e.svc.Fork(ctx, "team", "web", 2, 120)
	if err != nil {
		t.Fatalf("Fork: %v", err)
	}
	if len(children) != 2 {
		t.Fatalf("Fork made %d children", len(children))
	}
	seen := map[string]bool{}
	for _, c := range children {
		id := c.Annotations[sandbox.AnnotationID]
		if c.Namespace != "team" || c.Name != "web-fork-sb-"+strings.TrimPrefix(id, "sb_") {
			t.Fatalf("child named %s/%s (id %s)", c.Namespace, c.Name, id)
		}
		if c.UID == parent.UID || seen[string(c.UID)] {
			t.Fatalf("child UID %s not distinct", c.UID)
		}
		seen[string(c.UID)] = true
		live, _, ok := e.entry("team/web-fork-" + id)
		if !ok {
			t.Fatalf("node holds no child under claim ref team/web-fork-%s", id)
		}
		if got := live.Deadline.Sub(live.ClaimedAt).Seconds(); got != 120 {
			t.Fatalf("child lease %vs, want 120s", got)
		}
		if _, err := e.svc.Get(ctx, "team", c.Name); err != nil {
			t.Fatalf("Get child before publish: %v", err)
		}
	}
	e.publish()
	list, _, _ := e.svc.List(ctx, "team")
	if len(list) != 3 {
		t.Fatalf("List after fork = %d items, want parent and two children", len(list))
	}
	for _, c := range children {
		g, err := e.svc.Get(ctx, "team", c.Name)
		if err != nil || g.UID != c.UID {
			t.Fatalf("Get child after publish = %v, %v", g, err)
		}
		// A child is deleted by its served name.
		if _, err := e.svc.Delete(ctx, "team", c.Name); err != nil {
			t.Fatalf("Delete child: %v", err)
		}
	}

	for _, n := range []int{0, -1, sandbox.MaxForkCount + 1} {
		if _, err := e.svc.Fork(ctx, "team", "web", n, 0); !apierrors.IsBadRequest(err) {
			t.Errorf("Fork count %d = %v, want BadRequest", n, err)
		}
	}
	if _, err := e.svc.Fork(ctx, "team", "web", 1, -1); !apierrors.IsBadRequest(err) {
		t.Errorf("Fork ttl -1 = %v, want BadRequest", err)
	}
	if _, err := e.svc.Fork(ctx, "team", "nobody", 1, 0); !apierrors.IsNotFound(err) {
		t.Errorf("Fork unknown = %v, want NotFound", err)
	}
}

func TestSnapshot(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1})
	ctx := context.Background()
	if _, err := e.svc.Create(ctx, newSandbox("ns", "snap", "base")); err != nil {
		t.Fatal(err)
	}
	res, err := e.svc.Snapshot(ctx, "ns", "snap", "before-upgrade")
	if err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	if !strings.HasPrefix(res.ID, "ck_") || res.Name != "before-upgrade" || res.Node != "sim-node-0" || res.CreatedAt == "" {
		t.Fatalf("Snapshot = %+v", res)
	}
	if c := e.fleet.Node(0).Counters().Checkpoints; c != 1 {
		t.Fatalf("node took %d checkpoints", c)
	}
	unnamed, err := e.svc.Snapshot(ctx, "ns", "snap", "")
	if err != nil || unnamed.ID == res.ID || unnamed.Name != "" {
		t.Fatalf("unnamed Snapshot = %+v, %v", unnamed, err)
	}
	if _, err := e.svc.Snapshot(ctx, "ns", "snap", "no spaces allowed"); !apierrors.IsBadRequest(err) {
		t.Fatalf("Snapshot with a bad name = %v, want BadRequest", err)
	}
	if _, err := e.svc.Snapshot(ctx, "ns", "nobody", ""); !apierrors.IsNotFound(err) {
		t.Fatalf("Snapshot unknown = %v, want NotFound", err)
	}
}
