// Package podpath runs the Pod path this project is measured against:
// kubernetes-sigs/agent-sandbox's controller with its extensions (a Pod per
// Sandbox; a SandboxWarmPool keeps Sandboxes with running Pods ready, and a
// SandboxClaim adopts one), built from the module version in go.mod, on a
// real node cluster (tests/cluster). The Sandbox and SandboxClaim it serves
// are the upstream CRDs, so it cannot share a cluster with this project's
// APIService, which serves sandboxes.agents.x-k8s.io itself.
package podpath

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
	agentsandboxcrds "github.com/cocoonstack/sandbox-operator/tests/testdata/agentsandbox-crds"
)

// The upstream resources, all served at v1beta1.
var (
	SandboxGVR  = schema.GroupVersionResource{Group: "agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxes"}
	ClaimGVR    = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxclaims"}
	TemplateGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	WarmPoolGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
)

// Controller is the upstream controller running as a host process against
// the cluster, as a cluster admin: the measurements count its work, not
// the way it is deployed.
type Controller struct {
	proc *testbin.Process
}

// Start installs the four upstream CRDs and starts the controller (binary)
// with its extensions, its log in dir. No leader election (one replica),
// no webhooks (the CRDs carry v1beta1 alone, so nothing converts), and no
// metrics or probe listeners.
func Start(ctx context.Context, c *cluster.NodeCluster, binary, dir string) (*Controller, error) {
	if err := c.InstallCRDs(ctx, agentsandboxcrds.SandboxesYAML, agentsandboxcrds.SandboxClaimsYAML,
		agentsandboxcrds.SandboxTemplatesYAML, agentsandboxcrds.SandboxWarmPoolsYAML); err != nil {
		return nil, fmt.Errorf("agent-sandbox CRDs: %w", err)
	}
	p, err := testbin.StartProcess("agent-sandbox-controller", binary, filepath.Join(dir, "agent-sandbox-controller.log"), []string{
		"--extensions",
		"--leader-elect=false",
		"--enable-webhook=false",
		"--manage-webhook-certs=false",
		"--metrics-bind-address=0",
		"--health-probe-bind-address=0",
	}, []string{"KUBECONFIG=" + c.Kubeconfig()})
	if err != nil {
		return nil, err
	}
	return &Controller{proc: p}, nil
}

// Pid is the controller's pid.
func (ctl *Controller) Pid() int { return ctl.proc.Pid() }

// LogTail is the end of the controller's log.
func (ctl *Controller) LogTail(lines int) string { return ctl.proc.LogTail(lines) }

// Stop stops the controller.
func (ctl *Controller) Stop() error { return ctl.proc.Stop(15 * time.Second) }

// Pool creates a SandboxTemplate whose Pod runs image (one container,
// nothing else) and a SandboxWarmPool of replicas Sandboxes of it, both
// named name in namespace.
func Pool(ctx context.Context, c *cluster.NodeCluster, namespace, name, image string, replicas int) error {
	template := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "sandbox", "image": image, "imagePullPolicy": "Never"}},
			// Nothing to drain: a warm Pod deleted goes at once.
			"terminationGracePeriodSeconds": int64(0),
		}}},
	}}
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"replicas": int64(replicas), "sandboxTemplateRef": map[string]any{"name": name}},
	}}
	dyn := c.Dynamic()
	if _, err := dyn.Resource(TemplateGVR).Namespace(namespace).Create(ctx, template, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create SandboxTemplate %s/%s: %w", namespace, name, err)
	}
	if _, err := dyn.Resource(WarmPoolGVR).Namespace(namespace).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create SandboxWarmPool %s/%s: %w", namespace, name, err)
	}
	return nil
}

// ReadyReplicas is the pool's status.readyReplicas.
func ReadyReplicas(ctx context.Context, c *cluster.NodeCluster, namespace, name string) (int64, error) {
	pool, err := c.Dynamic().Resource(WarmPoolGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return 0, err
	}
	n, _, err := unstructured.NestedInt64(pool.Object, "status", "readyReplicas")
	return n, err
}

// ClaimObject is a SandboxClaim named name on the pool.
func ClaimObject(namespace, name, pool string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec":     map[string]any{"warmPoolRef": map[string]any{"name": pool}},
	}}
}

// Claim creates a SandboxClaim named name on the pool.
func Claim(ctx context.Context, c *cluster.NodeCluster, namespace, name, pool string) error {
	claim := ClaimObject(namespace, name, pool)
	if _, err := c.Dynamic().Resource(ClaimGVR).Namespace(namespace).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("create SandboxClaim %s/%s: %w", namespace, name, err)
	}
	return nil
}

// ClaimStatus is what a claim's status says: whether it is Ready, and the
// Sandbox it got.
type ClaimStatus struct {
	Ready   bool
	Reason  string // the Ready condition's reason, or why it is not known
	Sandbox string
}

// StatusOf reads a claim's status.
func StatusOf(ctx context.Context, c *cluster.NodeCluster, namespace, name string) (ClaimStatus, error) {
	claim, err := c.Dynamic().Resource(ClaimGVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ClaimStatus{}, err
	}
	var st ClaimStatus
	st.Sandbox, _, _ = unstructured.NestedString(claim.Object, "status", "sandbox", "name")
	conds, _, _ := unstructured.NestedSlice(claim.Object, "status", "conditions")
	st.Reason = "no Ready condition"
	for _, raw := range conds {
		cond, _ := raw.(map[string]any)
		if cond["type"] == "Ready" {
			st.Ready = cond["status"] == "True"
			st.Reason, _ = cond["reason"].(string)
		}
	}
	return st, nil
}

// Delete deletes a claim (and, through its ownership, the Sandbox and the
// Pod it adopted).
func Delete(ctx context.Context, c *cluster.NodeCluster, namespace, name string) error {
	err := c.Dynamic().Resource(ClaimGVR).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete SandboxClaim %s/%s: %w", namespace, name, err)
	}
	return nil
}

// podNameAnnotation names the Pod a Sandbox adopted from a warm pool, when
// it differs from the Sandbox's own name.
const podNameAnnotation = "agents.x-k8s.io/pod-name"

// PodOf is the name of the Pod a Sandbox runs in.
func PodOf(ctx context.Context, c *cluster.NodeCluster, namespace, sandbox string) (string, error) {
	sb, err := c.Dynamic().Resource(SandboxGVR).Namespace(namespace).Get(ctx, sandbox, metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("Sandbox %s/%s: %w", namespace, sandbox, err)
	}
	if pod := sb.GetAnnotations()[podNameAnnotation]; pod != "" {
		return pod, nil
	}
	return sb.GetName(), nil
}
