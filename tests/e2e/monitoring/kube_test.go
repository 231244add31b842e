package monitoring_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/prometheus"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
	agentsandboxcrds "github.com/cocoonstack/sandbox-operator/tests/testdata/agentsandbox-crds"
)

// The Kubernetes front's pool: a SandboxTemplate of kubeImage (net none,
// size small) and a SandboxWarmPool of kubeWarm VMs over the fleet, which
// the warm-pool driver sets on the nodes.
const (
	kubeImage     = "registry.example/agents/monitoring:1"
	kubeWarm      = 4
	kubeNamespace = "team-monitoring"
	kubeDomain    = "sandbox.kube-monitoring.test"
)

var (
	templateGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxtemplates"}
	warmPoolGVR = schema.GroupVersionResource{Group: "extensions.agents.x-k8s.io", Version: "v1beta1", Resource: "sandboxwarmpools"}
	sandboxGVR  = schema.GroupVersionResource{Group: harness.KubeAPIGroup, Version: harness.KubeAPIVersion, Resource: "sandboxes"}
)

// TestKubernetesPanelsHaveData: the Kubernetes front (sandbox-apiserver
// with its warm-pool driver, name holds, e2b surface and template builds,
// and sandbox-envd-proxy) behind a real kube-apiserver, over two simulated
// nodes that publish their NodeInventory. Prometheus scrapes
// sandbox-apiserver's /metrics through its own authentication, the proxy's
// metrics listener and the kube-apiserver's /metrics; after a workload
// every panel of the dashboard returns data, the Kubernetes-only ones
// included.
func TestKubernetesPanelsHaveData(t *testing.T) {
	apiserverBin := testbin.Path(t, "SANDBOX_APISERVER", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver")
	proxyBin := testbin.Path(t, "SANDBOX_ENVD_PROXY", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-envd-proxy")
	harness.LocateKubeAPIServer(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	c := harness.StartCluster(t, ctx, dir)
	if err := c.InstallCRDs(ctx, agentsandboxcrds.SandboxTemplatesYAML, agentsandboxcrds.SandboxWarmPoolsYAML); err != nil {
		t.Fatal(err)
	}

	token, secret, key := harness.RandomHex(t), harness.RandomHex(t), "e2b_"+harness.RandomHex(t)
	tokenFile := harness.WriteFile(t, dir, "sandboxd-token", token+"\n")
	secretFile := harness.WriteFile(t, dir, "envd-secret", secret+"\n")
	keyFile := harness.WriteFile(t, dir, "e2b-keys", key+" "+kubeNamespace+"\n")
	aliasFile := harness.WriteFile(t, dir, "e2b-aliases", "base "+kubeImage+"\n")

	// The nodes start with no pools: the warm-pool driver sets them.
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 2, RootToken: token, EchoPorts: []int{},
		Envd:        &simfleet.EnvdConfig{Secret: []byte(secret)},
		ScratchRoot: filepath.Join(dir, "scratch"),
		RefillDelay: 20 * time.Millisecond,
		Publish:     &simfleet.PublishConfig{Client: c.Dynamic(), Interval: time.Second},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fleet: %v", err)
		}
	})

	front := harness.StartKubeE2B(t, ctx, c, harness.KubeE2BConfig{
		APIServer: apiserverBin, EnvdProxy: proxyBin, Dir: dir,
		Namespace: kubeNamespace, Domain: kubeDomain,
		TokenFile: tokenFile, EnvdSecretFile: secretFile, APIKeyFile: keyFile, AliasFile: aliasFile,
		Args: []string{
			"--enable-warm-pool-driver=true",
			"--e2b-builds", "--e2b-build-dir=" + filepath.Join(dir, "builds"),
			"--e2b-create-rate=0", "--e2b-max-sandboxes=0",
		},
		ProxyMetrics: true,
	})
	applyWarmPool(t, ctx, c)
	var nodes []string
	for _, n := range f.Nodes() {
		nodes = append(nodes, n.Name())
	}
	harness.WaitInventory(t, ctx, c, nodes, 1)

	admin := c.AdminConfig()
	caFile := filepath.Join(dir, "kube-ca.crt")
	if err := os.WriteFile(caFile, c.CAData(), 0o600); err != nil {
		t.Fatal(err)
	}
	prom := prometheus.Start(t, filepath.Join(dir, "prometheus"), prometheus.Config{Jobs: []prometheus.Job{
		// The aggregated apiserver checks the token with the kube-apiserver
		// (TokenReview, then a SubjectAccessReview for GET /metrics). Its
		// test certificate names the Service, not this address.
		{Name: "sandbox-apiserver", MetricsURL: "https://" + front.SecureAddr + "/metrics", Bearer: admin.BearerToken, Insecure: true},
		{Name: "sandbox-envd-proxy", MetricsURL: "http://" + front.ProxyMetricsAddr + "/metrics"},
		{Name: "kube-apiserver", MetricsURL: admin.Host + "/metrics", Bearer: admin.BearerToken, CAFile: caFile},
	}, RuleFiles: []string{renderAlertRules(t, dir)}})
	prom.WaitScraping(t, ctx, 3)

	e2b := &e2bClient{api: "http://" + front.APIAddr, dataPlane: "http://" + front.ProxyAddr, key: key}
	s := &system{e2b: e2b, prom: prom}
	for start := time.Now(); time.Since(start) < trafficFor; {
		s.traffic(t, ctx)
		// The Sandbox API's own reads: a list, and a watch opened and
		// closed.
		if _, err := c.Dynamic().Resource(sandboxGVR).Namespace(kubeNamespace).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatalf("list sandboxes: %v", err)
		}
		w, err := c.Dynamic().Resource(sandboxGVR).Namespace(kubeNamespace).Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatalf("watch sandboxes: %v", err)
		}
		w.Stop()
	}
	s.build(t, ctx)

	panels := dashboardPanels(t)
	for _, p := range panels {
		poll.UntilNil(t, "panel "+p.Title+" to have data", func() error { return prom.HasData(ctx, p) })
	}
	t.Logf("every one of the dashboard's %d panel queries returns data from the Kubernetes front", len(panels))
}

// applyWarmPool creates the SandboxTemplate and SandboxWarmPool of the
// Kubernetes front's pool.
func applyWarmPool(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeNamespace}}
	if _, err := c.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tpl := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
		"metadata": map[string]any{"name": "monitoring", "namespace": kubeNamespace},
		"spec": map[string]any{"podTemplate": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "sandbox", "image": kubeImage}},
		}}},
	}}
	if _, err := c.Dynamic().Resource(templateGVR).Namespace(kubeNamespace).Create(ctx, tpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the SandboxTemplate: %v", err)
	}
	pool := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
		"metadata": map[string]any{"name": "monitoring", "namespace": kubeNamespace},
		"spec":     map[string]any{"replicas": int64(kubeWarm), "sandboxTemplateRef": map[string]any{"name": "monitoring"}},
	}}
	if _, err := c.Dynamic().Resource(warmPoolGVR).Namespace(kubeNamespace).Create(ctx, pool, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create the SandboxWarmPool: %v", err)
	}
}
