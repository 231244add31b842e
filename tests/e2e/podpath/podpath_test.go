// Package podpath_test keeps the Pod path this project is measured against
// (docs/performance.md) from rotting: kubernetes-sigs/agent-sandbox's
// controller, built from the module version in go.mod, on a real node
// cluster (a kubelet on containerd) fills a warm pool of 2 Pods of our own
// image, answers a claim by adopting one, refills, and lets a delete take
// the claim's Sandbox and Pod away.
package podpath_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/podpath"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

func TestMain(m *testing.M) { os.Exit(cluster.RunIsolated(m.Run)) }

const (
	namespace = "default"
	poolName  = "pause"
	poolSize  = 2
	// pauseImage is the build's pause image, which the node imports.
	pauseImage = "ghcr.io/cocoonstack/pause"
)

func TestWarmPoolClaimDelete(t *testing.T) {
	controller, err := testbin.Runfile("AGENT_SANDBOX_CONTROLLER")
	if err != nil {
		t.Fatal(err)
	}
	pauseTar, err := testbin.Runfile("PAUSE_IMAGE")
	if err != nil {
		t.Fatal(err)
	}
	if controller == "" || pauseTar == "" {
		t.Skip("AGENT_SANDBOX_CONTROLLER and PAUSE_IMAGE are not set: this test runs under Bazel (tools/bazel test //tests/e2e/podpath:podpath_test), which builds them")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	dir := t.TempDir()
	image := cluster.NodeImage{Tar: pauseTar, Name: pauseImage}
	n, err := cluster.StartNodeCluster(ctx, dir, cluster.NodeOptions{SandboxImage: image})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := n.Stop(); err != nil {
			t.Errorf("stop the cluster: %v", err)
		}
	})
	ctl, err := podpath.Start(ctx, n, controller, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(ctl.LogTail(60))
			t.Log(n.LogTail())
		}
		if err := ctl.Stop(); err != nil {
			t.Errorf("stop the controller: %v", err)
		}
	})

	ref, err := cluster.ImageRef(image)
	if err != nil {
		t.Fatal(err)
	}
	if err := podpath.Pool(ctx, n, namespace, poolName, ref, poolSize); err != nil {
		t.Fatal(err)
	}
	waitPoolReady := func(what string) {
		t.Helper()
		poll.UntilNil(t, what, func() error {
			ready, err := podpath.ReadyReplicas(ctx, n, namespace, poolName)
			if err != nil {
				return err
			}
			if running := runningPods(t, ctx, n); ready != poolSize || running < poolSize {
				return fmt.Errorf("%d of %d ready; %d Pods running", ready, poolSize, running)
			}
			return nil
		})
	}
	waitPoolReady("the warm pool's 2 Pods to run")
	warm := runningPodNames(t, ctx, n)

	// A claim adopts one of the warm Sandboxes: its Pod is one that was
	// already running, and no new Pod starts for it.
	began := time.Now()
	if err := podpath.Claim(ctx, n, namespace, "claim-1", poolName); err != nil {
		t.Fatal(err)
	}
	var st podpath.ClaimStatus
	poll.UntilNil(t, "the claim to be Ready", func() error {
		if st, err = podpath.StatusOf(ctx, n, namespace, "claim-1"); err != nil {
			return err
		}
		if !st.Ready || st.Sandbox == "" {
			return fmt.Errorf("claim-1: Ready=%v (%s), sandbox %q", st.Ready, st.Reason, st.Sandbox)
		}
		return nil
	})
	t.Logf("claim to Ready: %v, Sandbox %s", time.Since(began).Round(time.Millisecond), st.Sandbox)
	pod, err := podpath.PodOf(ctx, n, namespace, st.Sandbox)
	if err != nil {
		t.Fatal(err)
	}
	if !warm[pod] {
		t.Errorf("the claim's Sandbox %s runs in Pod %s, not one of the warm pool's %v", st.Sandbox, pod, warm)
	}

	// The pool refills behind the claim.
	waitPoolReady("the pool to refill to 2 beside the claim")

	// Deleting the claim takes its Sandbox and Pod away.
	if err := podpath.Delete(ctx, n, namespace, "claim-1"); err != nil {
		t.Fatal(err)
	}
	poll.UntilNil(t, "the claimed Sandbox and its Pod to be gone", func() error {
		_, err := n.Dynamic().Resource(podpath.SandboxGVR).Namespace(namespace).Get(ctx, st.Sandbox, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Sandbox %s: %v", st.Sandbox, err)
		}
		_, err = n.Clientset().CoreV1().Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("Pod %s: %v", pod, err)
		}
		return nil
	})
	waitPoolReady("the pool to stay at 2")
}

// runningPodNames are the names of the Pods in the namespace that run.
func runningPodNames(t *testing.T, ctx context.Context, n *cluster.NodeCluster) map[string]bool {
	t.Helper()
	pods, err := n.Clientset().CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, p := range pods.Items {
		if p.Status.Phase == "Running" && p.DeletionTimestamp == nil {
			out[p.Name] = true
		}
	}
	return out
}

func runningPods(t *testing.T, ctx context.Context, n *cluster.NodeCluster) int {
	t.Helper()
	return len(runningPodNames(t, ctx, n))
}
