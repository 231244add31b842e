package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/podpath"
	agentsandboxcrds "github.com/cocoonstack/sandbox-operator/tests/testdata/agentsandbox-crds"
)

// A path is one way to get a warm sandbox on the node: the same
// SandboxTemplate and SandboxWarmPool objects fill it, and the workload
// asks for sandboxes through the object it defines (a SandboxClaim on the
// Pod path, a Sandbox here), each Ready when its condition says so.
type path interface {
	// name is the report's column.
	name() string
	// requests is the resource a create makes and readiness is read
	// from.
	requests() schema.GroupVersionResource
	// request is the object asking for one sandbox named name.
	request(name string) *unstructured.Unstructured
	// sandboxes is the resource listed as "every sandbox".
	sandboxes() schema.GroupVersionResource
	// controlPlane are the pids of the path's own control plane by name.
	controlPlane() map[string]int
	// warm counts the pool's warm sandboxes, as the path knows them, in
	// reports made after since.
	warm(ctx context.Context, n *cluster.NodeCluster, since time.Time) (int, error)
	close() error
}

// The pool both paths fill, in one namespace.
const (
	namespace = "default"
	poolName  = "bench"
)

// podPath is kubernetes-sigs/agent-sandbox's controller: a SandboxClaim
// adopts a warm Sandbox whose Pod the kubelet already runs.
type podPath struct {
	ctl *podpath.Controller
	pid int
}

func startPodPath(ctx context.Context, n *cluster.NodeCluster, b binaries, dir string) (*podPath, error) {
	ctl, err := podpath.Start(ctx, n, b.controller, dir)
	if err != nil {
		return nil, err
	}
	return &podPath{ctl: ctl, pid: ctl.Pid()}, nil
}

func (p *podPath) name() string                          { return "Pod path (agent-sandbox controller)" }
func (p *podPath) requests() schema.GroupVersionResource { return podpath.ClaimGVR }
func (p *podPath) sandboxes() schema.GroupVersionResource {
	return podpath.SandboxGVR
}
func (p *podPath) controlPlane() map[string]int {
	return map[string]int{"agent-sandbox-controller": p.pid}
}
func (p *podPath) close() error { return p.ctl.Stop() }

// warm is the pool's status.readyReplicas, which the controller keeps as
// it sees its Sandboxes change; the status carries no time to hold since
// against.
func (p *podPath) warm(ctx context.Context, n *cluster.NodeCluster, _ time.Time) (int, error) {
	ready, err := podpath.ReadyReplicas(ctx, n, namespace, poolName)
	return int(ready), err
}

func (p *podPath) request(name string) *unstructured.Unstructured {
	return podpath.ClaimObject(namespace, name, poolName)
}

// operatorPath is this project's Kubernetes front: sandbox-apiserver serves
// Sandbox (no etcd) and its warm-pool driver spreads the SandboxWarmPool
// over simulated sandboxd nodes publishing NodeInventory.
type operatorPath struct {
	server *apiserverenv.Server
	fleet  *simfleet.Fleet
}

// operatorNodes is how many simulated sandboxd nodes hold the pool.
const operatorNodes = 2

func startOperatorPath(ctx context.Context, n *cluster.NodeCluster, b binaries, dir string) (*operatorPath, error) {
	if err := n.InstallCRDs(ctx, crds.NodeInventoryYAML, agentsandboxcrds.SandboxTemplatesYAML, agentsandboxcrds.SandboxWarmPoolsYAML); err != nil {
		return nil, err
	}
	tokenFile, token, err := apiserverenv.WriteSandboxdToken(dir)
	if err != nil {
		return nil, err
	}
	o := &operatorPath{}
	// The nodes start empty: the warm-pool driver sets their pools. Their
	// claim cap is far above the largest burst.
	if o.fleet, err = simfleet.Start(context.Background(), simfleet.Config{
		Nodes: operatorNodes, RootToken: token, EchoPorts: []int{},
		MaxClaims:   10000,
		ScratchRoot: filepath.Join(dir, "scratch"),
		Publish:     &simfleet.PublishConfig{Client: n.Dynamic(), Interval: time.Second},
	}); err != nil {
		return nil, fmt.Errorf("start the simulated nodes: %w", err)
	}
	if o.server, err = apiserverenv.Start(ctx, n.Cluster, apiserverenv.Options{
		Binary:              b.server,
		Dir:                 dir,
		SandboxdTokenFile:   tokenFile,
		InventoryStaleAfter: 10 * time.Second,
		ExtraArgs:           []string{"--enable-warm-pool-driver=true"},
	}); err != nil {
		return nil, errors.Join(err, o.fleet.Close())
	}
	if err := o.server.WaitReady(ctx); err != nil {
		return nil, errors.Join(err, o.close())
	}
	return o, nil
}

func (o *operatorPath) name() string                           { return "this system (sandbox-apiserver)" }
func (o *operatorPath) requests() schema.GroupVersionResource  { return apiserverenv.SandboxGVR }
func (o *operatorPath) sandboxes() schema.GroupVersionResource { return apiserverenv.SandboxGVR }
func (o *operatorPath) controlPlane() map[string]int {
	return map[string]int{"sandbox-apiserver": o.server.Pid()}
}

// warm sums the nodes' published warm VMs of the pool's template: the
// driver's status.readyReplicas is written when it reconciles, which a
// claim does not trigger. A node that has not published since counts
// nothing: its inventory predates what the caller waits for.
func (o *operatorPath) warm(ctx context.Context, n *cluster.NodeCluster, since time.Time) (int, error) {
	list, err := n.Dynamic().Resource(v1beta1.NodeInventoryGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	total := 0
	for _, inv := range list.Items {
		published, _, _ := unstructured.NestedString(inv.Object, "publishedAt")
		at, err := time.Parse(time.RFC3339, published)
		if err != nil || !at.After(since) {
			continue
		}
		pools, _, _ := unstructured.NestedSlice(inv.Object, "pools")
		for _, raw := range pools {
			pool, _ := raw.(map[string]any)
			template, _, _ := unstructured.NestedString(pool, "template")
			warm, _, _ := unstructured.NestedInt64(pool, "warm")
			if template == poolImage {
				total += int(warm)
			}
		}
	}
	return total, nil
}

func (o *operatorPath) close() error {
	return errors.Join(o.server.Stop(), o.fleet.Close())
}

// request is a Sandbox whose Pod template names the pool's image: it is
// claimed from that pool on a node.
func (o *operatorPath) request(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": apiserverenv.Group + "/" + apiserverenv.Version, "kind": "Sandbox",
		"metadata": map[string]any{"name": name, "namespace": namespace},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "sandbox", "image": poolImage}},
		}}},
	}}
}

// poolImage is what the template's Pod runs: the build's pause image,
// imported into the node (the Pod path runs it; this system's nodes take
// it as the template to keep warm).
var poolImage string

// deleteRequest deletes one request; a missing one is already gone.
func deleteRequest(ctx context.Context, n *cluster.NodeCluster, p path, name string) error {
	err := n.Dynamic().Resource(p.requests()).Namespace(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
