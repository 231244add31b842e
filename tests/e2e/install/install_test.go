// Package install_test does what a platform team does in its first hour,
// on a real single-node cluster built from source (tests/cluster): install
// the two upstream CRDs, helm install the packaged chart with the helm the
// build makes, wait for the rollouts and the APIService, kubectl apply the
// examples, watch the warm pool fill, claim and free a Sandbox, drive the
// e2b SDK through the in-cluster Services, watch it all in Prometheus
// through the release's ServiceMonitors, PrometheusRule and dashboard,
// upgrade and uninstall.
//
// The node runs the images the build made (imported into containerd; no
// pull), with the build's own pause image. The sandboxd nodes are
// simulator processes on the node's address, publishing NodeInventory as a
// real node does. Every failure prints the logs that explain it.
package install_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/install"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
)

// stepTimeout bounds each wait of the test.
const stepTimeout = 3 * time.Minute

var (
	nodeInvGVR = schema.GroupVersionResource{Group: "sandbox.cocoonstack.io", Version: "v1beta1", Resource: "nodeinventories"}
)

func TestMain(m *testing.M) { os.Exit(cluster.RunIsolated(m.Run)) }

func TestInstallOnARealNode(t *testing.T) {
	a, missing, err := install.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if missing != "" {
		t.Skipf("%s is not set: this test runs under Bazel (tools/bazel test //tests/e2e/install), which builds the chart, images and tools it installs", missing)
	}
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 25*time.Minute)
	defer cancel()
	st, err := install.Up(ctx, t.TempDir(), a, t.Logf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(st.LogTail())
		}
		if err := st.Down(); err != nil {
			t.Errorf("stop: %v", err)
		}
	})
	n := st.Node
	dyn := n.Dynamic()
	tm := n.Timings()
	t.Logf("timings: cluster up %v (control plane %v, image import %v), install to Ready %v",
		st.ClusterUp.Round(time.Millisecond), tm.ControlPlane.Round(time.Millisecond),
		tm.Images.Round(time.Millisecond), st.InstallToReady.Round(time.Millisecond))

	// A Prometheus configured from the release's ServiceMonitors and
	// PrometheusRule scrapes everything that follows.
	prom := startMonitoring(t, ctx, st)

	// The examples: the warm pool fills the nodes' pools.
	if err := install.ApplyWarmPools(ctx, st, a, t.Logf); err != nil {
		t.Fatal(err)
	}

	// A Sandbox claims one; kubectl get lists it with its node.
	kubectl(t, ctx, n, "apply", "-f", a.Sandbox)
	sb := mustFirst(t, a.Sandbox, "Sandbox")
	var nodeName string
	waitFor(t, ctx, "Sandbox "+sb.GetName()+" listed with its node", func() (bool, string) {
		out, err := n.Kubectl(ctx, "get", "sandboxes", "-n", install.NamespaceOf(sb))
		if err != nil {
			return false, err.Error()
		}
		for _, line := range strings.Split(out, "\n") {
			if f := strings.Fields(line); len(f) > 1 && f[0] == sb.GetName() {
				if strings.HasPrefix(f[1], "sim-node-") {
					nodeName = f[1]
					return true, line
				}
				return false, line
			}
		}
		return false, out
	})
	t.Logf("Sandbox %s/%s runs on %s", install.NamespaceOf(sb), sb.GetName(), nodeName)
	claimRef := install.NamespaceOf(sb) + "/" + sb.GetName()
	// The node publishes every 2 s; the claim shows up in its inventory.
	waitFor(t, ctx, "NodeInventory "+nodeName+" listing "+claimRef, func() (bool, string) {
		return inventoryHas(ctx, t, dyn, nodeName, claimRef), "not listed"
	})

	// kubectl delete frees it on the node.
	kubectl(t, ctx, n, "delete", "-f", a.Sandbox, "--wait=true")
	waitFor(t, ctx, "the claim gone from "+nodeName, func() (bool, string) {
		if inventoryHas(ctx, t, dyn, nodeName, claimRef) {
			return false, "still in NodeInventory " + nodeName
		}
		return true, ""
	})

	// The unmodified e2b SDK through the in-cluster Services.
	e2bAddr, err := st.ServiceAddr(ctx, "sandbox-apiserver-e2b")
	if err != nil {
		t.Fatal(err)
	}
	proxyAddr, err := st.ServiceAddr(ctx, "sandbox-envd-proxy")
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, ctx, "the e2b API answering through its Service", func() (bool, string) {
		resp, err := http.Get("http://" + e2bAddr + "/health")
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, resp.Status
	})
	project := nodejs.Setup(t, "tools/quickstart")
	project.Copy(t, "quickstart.mjs")
	sdkCtx, sdkCancel := context.WithTimeout(ctx, stepTimeout)
	defer sdkCancel()
	out := project.Run(t, sdkCtx, []string{
		"E2B_API_URL=http://" + e2bAddr,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + install.Domain,
		"E2B_API_KEY=" + st.APIKey,
	}, "quickstart.mjs")
	for _, want := range []string{"command said: hello from the sandbox", "inside the sandbox: cwd /home/user, user user, hostname sb-",
		"holds: written by the quickstart", "port 8000 served: hello from a web server in the sandbox", "killed sandbox",
		"paused at its timeout", `a request woke it: the file holds "kept while paused", the sandbox is running`,
		"sandbox from the template holds: hello from a template / HELLO FROM A TEMPLATE", "deleted template quickstart",
		"the code interpreter printed: six times seven is 42", "and returned a chart: a "} {
		if !strings.Contains(out, want) {
			t.Errorf("quickstart output lacks %q:\n%s", want, out)
		}
	}

	// The SDK suite of the Kubernetes path, against the two replicas of
	// the install with every call going to the other replica than the one
	// before: a create answered by one replica is read, paused, connected
	// and killed through the other.
	replicas := e2bReplicas(ctx, t, n)
	baseTemplate := mustFirst(t, a.E2BWarmPool, "SandboxTemplate")
	containers, _, _ := unstructured.NestedSlice(baseTemplate.Object, "spec", "podTemplate", "spec", "containers")
	baseImage := ""
	if len(containers) > 0 {
		baseImage, _, _ = unstructured.NestedString(containers[0].(map[string]any), "image")
	}
	if baseImage == "" {
		t.Fatalf("%s names no image", a.E2BWarmPool)
	}
	front := startSpread(t, replicas)
	suite := nodejs.Setup(t, "tests/e2e/js")
	suite.Copy(t, "lib.mjs", "kube.test.mjs")
	suiteCtx, suiteCancel := context.WithTimeout(ctx, 2*stepTimeout)
	defer suiteCancel()
	suite.Run(t, suiteCtx, []string{
		"E2B_API_URL=" + front.URL,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + install.Domain,
		"E2B_API_KEY=" + st.APIKey,
		"E2E_OTHER_KEY=" + st.OtherAPIKey,
		"E2E_TEMPLATE=" + baseImage,
		"E2E_REPORT=" + filepath.Join(t.TempDir(), "report.json"),
	}, "--test", "--test-reporter=spec", "--test-concurrency=1", "kube.test.mjs")
	served := front.counts()
	t.Logf("the Kubernetes-path SDK suite through both replicas: requests served by%s", describeCounts(served))
	for _, r := range replicas {
		if served[r] == 0 {
			t.Errorf("replica %s served none of the suite's calls", r)
		}
	}

	// Template builds and snapshots, on the volume both replicas mount.
	// A build's state lives on the replica that runs it, so the suite goes
	// through the e2b Service, whose ClientIP affinity keeps a client on
	// one replica while builds are on.
	suite.Copy(t, "templates.test.mjs")
	buildsCtx, buildsCancel := context.WithTimeout(ctx, 3*stepTimeout)
	defer buildsCancel()
	suite.Run(t, buildsCtx, []string{
		"E2B_API_URL=http://" + e2bAddr,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + install.Domain,
		"E2B_API_KEY=" + st.APIKey,
		"E2E_TEMPLATE_PREFIX=install-",
		"E2E_BUILD_PARALLEL=2",
	}, "--test", "--test-reporter=spec", "--test-concurrency=1", "templates.test.mjs")

	// The code interpreter (@e2b/code-interpreter) from the example's warm
	// pools of e2b-ci, through the e2b Service and the envd proxy.
	suite.Copy(t, "codeinterp.test.mjs")
	ciCtx, ciCancel := context.WithTimeout(ctx, 2*stepTimeout)
	defer ciCancel()
	suite.Run(t, ciCtx, []string{
		"E2B_API_URL=http://" + e2bAddr,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + install.Domain,
		"E2B_API_KEY=" + st.APIKey,
	}, "--test", "--test-reporter=spec", "--test-concurrency=1", "codeinterp.test.mjs")

	// What the workload above left in Prometheus: every panel of the
	// installed dashboard has data, and the alerts evaluate quietly.
	checkMonitoring(t, ctx, st, prom)

	// Upgrade without dropping work: a helm upgrade that rolls every pod,
	// a rollout restart, and one pod of each Deployment deleted, all under
	// a steady load through the Services.
	load := startLoad(e2bAddr, proxyAddr, st.APIKey, install.Domain, 3)
	avail := watchAvailability(ctx, n)
	before := podNames(t, ctx, n, "app.kubernetes.io/name=sandbox-apiserver")
	upgradeBegan := time.Now()
	if err := st.Upgrade(ctx, "--set", "logLevel=debug"); err != nil {
		t.Fatal(err)
	}
	if err := st.WaitRollouts(ctx); err != nil {
		t.Fatal(err)
	}
	upgradeTook := time.Since(upgradeBegan)
	after := podNames(t, ctx, n, "app.kubernetes.io/name=sandbox-apiserver")
	for name := range after {
		if before[name] {
			t.Errorf("pod %s survived an upgrade that changed the pod template", name)
		}
	}
	if len(after) == 0 {
		t.Error("no sandbox-apiserver pods after the upgrade")
	}
	restartBegan := time.Now()
	kubectl(t, ctx, n, "-n", install.Namespace, "rollout", "restart", "deployment/sandbox-apiserver", "deployment/sandbox-envd-proxy")
	if err := st.WaitRollouts(ctx); err != nil {
		t.Fatal(err)
	}
	restartTook := time.Since(restartBegan)
	deleteBegan := time.Now()
	for _, app := range []string{"sandbox-apiserver", "sandbox-envd-proxy"} {
		pods := podNames(t, ctx, n, "app.kubernetes.io/name="+app)
		for name := range pods {
			kubectl(t, ctx, n, "-n", install.Namespace, "delete", "pod", name)
			break
		}
	}
	waitFor(t, ctx, "both Deployments fully available after the pod deletions", func() (bool, string) {
		return allAvailable(ctx, n)
	})
	deleteTook := time.Since(deleteBegan)
	calls, failed, failures := load.stopLoad()
	minAvail := avail.stop()
	t.Logf("under a steady load of %d calls (3 workers: create, get, list, 2 MiB upload and read back through the proxy, kill): helm upgrade %v, rollout restart %v, one pod of each deleted %v; %d calls failed; fewest available replicas seen: %v",
		calls, upgradeTook.Round(time.Millisecond), restartTook.Round(time.Millisecond), deleteTook.Round(time.Millisecond), failed, minAvail)
	t.Logf("long streamed commands (%d lines over ~10 s each, through the proxy) while the pods were replaced: %d started, %d completed, %d cut with an error the caller sees (and retries)",
		streamLines, load.streamed.started.Load(), load.streamed.completed.Load(), load.streamed.cut.Load())
	if load.streamed.completed.Load() == 0 {
		t.Errorf("no streamed command completed during the upgrade, restart and pod deletions")
	}
	if failed > 0 {
		t.Errorf("%d of %d calls failed while the pods were replaced:\n%s", failed, calls, strings.Join(failures, "\n"))
	}
	if calls < 30 {
		t.Errorf("only %d calls were made during the changes; the load did not run", calls)
	}

	// helm uninstall removes every object it created.
	manifest, err := st.Helm(ctx, "get", "manifest", install.Release, "--namespace", install.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := install.DecodeAll(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if len(objects) < 10 {
		t.Fatalf("helm get manifest gave %d objects", len(objects))
	}
	if _, err := st.Helm(ctx, "uninstall", install.Release, "--namespace", install.Namespace, "--wait", "--timeout=3m"); err != nil {
		t.Fatal(err)
	}
	for _, obj := range objects {
		mapping, err := n.RESTMapping(obj.GroupVersionKind())
		if err != nil {
			t.Errorf("%s %s: %v", obj.GetKind(), obj.GetName(), err)
			continue
		}
		ri := dyn.Resource(mapping.Resource)
		var getErr error
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns := obj.GetNamespace()
			if ns == "" {
				ns = install.Namespace
			}
			_, getErr = ri.Namespace(ns).Get(ctx, obj.GetName(), metav1.GetOptions{})
		} else {
			_, getErr = ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		}
		if !apierrors.IsNotFound(getErr) {
			t.Errorf("after helm uninstall, %s %s: %v (want NotFound)", obj.GetKind(), obj.GetName(), getErr)
		}
	}
	t.Logf("total %v", time.Since(began).Round(time.Millisecond))
}

func kubectl(t *testing.T, ctx context.Context, n *cluster.NodeCluster, args ...string) string {
	t.Helper()
	out, err := n.Kubectl(ctx, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// waitFor polls cond every half second until it holds or stepTimeout
// passes, then fails with cond's last word.
func waitFor(t *testing.T, ctx context.Context, what string, cond func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, stepTimeout)
	defer cancel()
	last := ""
	for {
		ok, why := cond()
		if ok {
			return
		}
		last = why
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v (last: %s)", what, ctx.Err(), last)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// inventoryHas reports whether node's NodeInventory lists claimRef.
func inventoryHas(ctx context.Context, t *testing.T, dyn dynamic.Interface, node, claimRef string) bool {
	inv, err := dyn.Resource(nodeInvGVR).Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Logf("NodeInventory %s: %v", node, err)
		return false
	}
	entries, _, _ := unstructured.NestedSlice(inv.Object, "entries")
	var names []string
	for _, e := range entries {
		m, _ := e.(map[string]any)
		if m["name"] == claimRef || m["claimRef"] == claimRef {
			return true
		}
		names = append(names, fmt.Sprint(m["name"]))
	}
	t.Logf("NodeInventory %s lists %v", node, names)
	return false
}

func podNames(t *testing.T, ctx context.Context, n *cluster.NodeCluster, selector string) map[string]bool {
	t.Helper()
	pods, err := n.Clientset().CoreV1().Pods(install.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			names[p.Name] = true
		}
	}
	return names
}

func mustFirst(t *testing.T, path, kind string) *unstructured.Unstructured {
	t.Helper()
	o, err := install.FirstObject(path, kind)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
