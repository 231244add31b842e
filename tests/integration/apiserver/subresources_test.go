package apiserver_test

import (
	"net/http"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/api/subresources"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

func optionsMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: group + "/" + version, Kind: kind}
}

// TestSubresources drives pause, resume, fork and snapshot through the
// aggregator with the REST client and checks each took effect on the
// sandbox's node.
func TestSubresources(t *testing.T) {
	e := sharedEnv(t)
	ctx := testContext(t)
	const ns, name = "subresources", "parent"

	parent := e.mustCreate(ctx, t, newSandbox(ns, name, withImage(imagePython)))
	nodeIdx := e.nodeIndex(parent.Status.NodeName)
	id := parent.Annotations[sandbox.AnnotationID]

	t.Run("Pause", func(t *testing.T) {
		// Twice: pause is idempotent.
		for range 2 {
			var got agentsv1beta1.Sandbox
			if err := e.postSubresource(ctx, ns, name, "pause", subresources.SandboxPauseOptions{TypeMeta: optionsMeta("SandboxPauseOptions")}, &got); err != nil {
				t.Fatalf("pause: %v", err)
			}
			if got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
				t.Errorf("pause answered operatingMode %q, want Suspended", got.Spec.OperatingMode)
			}
			if c, ok := condition(&got, "Suspended"); !ok || c.Status != metav1.ConditionTrue {
				t.Errorf("pause answered Suspended condition %+v, want True", c)
			}
		}
		if en, ok := e.entry(nodeIdx, id); !ok || en.Phase != node.PhaseHibernated {
			t.Errorf("node phase after pause: %+v (held %t), want %s", en, ok, node.PhaseHibernated)
		}
		got, err := e.getSandbox(ctx, t, ns, name)
		if err != nil || got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeSuspended {
			t.Errorf("get after pause: operatingMode %q (%v), want Suspended", got.Spec.OperatingMode, err)
		}
	})

	t.Run("Resume", func(t *testing.T) {
		var got agentsv1beta1.Sandbox
		// apiVersion and kind may be left out.
		if err := e.postSubresource(ctx, ns, name, "resume", map[string]any{}, &got); err != nil {
			t.Fatalf("resume: %v", err)
		}
		if got.Spec.OperatingMode != agentsv1beta1.SandboxOperatingModeRunning {
			t.Errorf("resume answered operatingMode %q, want Running", got.Spec.OperatingMode)
		}
		if c, ok := condition(&got, "Ready"); !ok || c.Status != metav1.ConditionTrue {
			t.Errorf("resume answered Ready condition %+v, want True", c)
		}
		if en, ok := e.entry(nodeIdx, id); !ok || en.Phase != node.PhaseRunning {
			t.Errorf("node phase after resume: %+v (held %t), want %s", en, ok, node.PhaseRunning)
		}
	})

	t.Run("Fork", func(t *testing.T) {
		before := e.nodeClaims(nodeIdx)
		var res subresources.SandboxForkResult
		opts := subresources.SandboxForkOptions{TypeMeta: optionsMeta("SandboxForkOptions"), Count: 2, TTLSeconds: 600}
		if err := e.postSubresource(ctx, ns, name, "fork", opts, &res); err != nil {
			t.Fatalf("fork: %v", err)
		}
		if res.Kind != "SandboxForkResult" || res.Parent != name || len(res.Children) != 2 {
			t.Fatalf("fork answered kind %q parent %q with %d children, want SandboxForkResult of %s with 2", res.Kind, res.Parent, len(res.Children), name)
		}
		var want []string
		for _, c := range res.Children {
			e.deleteAtCleanup(t, ns, c.Name)
			if c.Namespace != ns || !strings.HasPrefix(c.Name, name+"-fork-") {
				t.Errorf("fork child %s/%s, want %s/%s-fork-…", c.Namespace, c.Name, ns, name)
			}
			if c.Status.NodeName != parent.Status.NodeName {
				t.Errorf("fork child %s on %q, the parent is on %q", c.Name, c.Status.NodeName, parent.Status.NodeName)
			}
			want = append(want, ns+"/"+c.Name)
		}
		if after := e.nodeClaims(nodeIdx); after != before+2 {
			t.Errorf("the parent's node holds %d claims after fork, %d before; want 2 more", after, before)
		}
		want = append(want, ns+"/"+name)
		slices.Sort(want)
		got, err := listNames(ctx, e.sandboxes, ns, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("list after fork: %v", err)
		}
		if !slices.Equal(got, want) {
			t.Errorf("list %s after fork: %v, want %v", ns, got, want)
		}
		for _, c := range res.Children {
			if _, err := e.getSandbox(ctx, t, ns, c.Name); err != nil {
				t.Errorf("get fork child %s: %v", c.Name, err)
			}
		}
	})

	t.Run("Snapshot", func(t *testing.T) {
		var snap subresources.SandboxSnapshot
		opts := subresources.SandboxSnapshotOptions{TypeMeta: optionsMeta("SandboxSnapshotOptions"), Name: "before-upgrade"}
		if err := e.postSubresource(ctx, ns, name, "snapshot", opts, &snap); err != nil {
			t.Fatalf("snapshot: %v", err)
		}
		if snap.Kind != "SandboxSnapshot" || snap.Sandbox != name || snap.Name != "before-upgrade" || snap.ID == "" || snap.CreatedAt == "" {
			t.Errorf("snapshot answered %+v", snap)
		}
		if snap.Node != parent.Status.NodeName {
			t.Errorf("snapshot on node %q, the sandbox is on %q", snap.Node, parent.Status.NodeName)
		}
		if !e.fleet.Node(nodeIdx).HasCheckpoint(snap.ID) {
			t.Errorf("node %s has no checkpoint %s", parent.Status.NodeName, snap.ID)
		}
	})

	t.Run("Refusals", func(t *testing.T) {
		var out map[string]any
		err := e.postSubresource(ctx, ns, name, "pause", subresources.SandboxForkOptions{TypeMeta: optionsMeta("SandboxForkOptions")}, &out)
		if !apierrors.IsBadRequest(err) {
			t.Errorf("pause with a SandboxForkOptions body: %v, want 400", err)
		}
		err = e.postSubresource(ctx, ns, "no-such-sandbox", "pause", map[string]any{}, &out)
		if !apierrors.IsNotFound(err) {
			t.Errorf("pause an unknown sandbox: %v, want 404", err)
		}
		err = e.postSubresource(ctx, ns, name, "fork", map[string]any{"count": 65}, &out)
		if statusCode(err) != http.StatusUnprocessableEntity {
			t.Errorf("fork count 65: %v, want 422", err)
		}
	})
}
