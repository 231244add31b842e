// Package kube_test runs the unmodified e2b JavaScript SDK against the
// Kubernetes deployment of sandbox-operator: sandbox-apiserver serving its
// e2b surface (behind a real kube-apiserver, reading NodeInventory published
// by a simulated sandboxd fleet) and sandbox-envd-proxy carrying the SDK's
// data plane to the fleet's envd-compatible guests. The suite itself is
// tests/e2e/js/kube.test.mjs; this harness starts the servers, runs it with
// node, and then checks through the Kubernetes API what it created.
package kube_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/apis/sandbox/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/fleet"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	apiNamespace   = "sandbox-system"
	apiServiceName = "sandbox-apiserver"
	group          = "agents.x-k8s.io"
	version        = "v1beta1"

	// The e2b keys' namespaces: the suite's key claims in teamA; the other
	// key sees teamB only.
	teamA = "team-a"
	teamB = "team-b"

	// The SDK's default alias and the pool image behind it; the suite
	// also names imageDirect without an alias.
	aliasBase   = "base"
	imageBase   = "registry.example/agents/base:1"
	imageDirect = "python-3.12"

	domain = "sandbox.e2e.test"

	setupTimeout = 4 * time.Minute
	suiteTimeout = 8 * time.Minute
	pollEvery    = 100 * time.Millisecond
)

var sandboxGVR = schema.GroupVersionResource{Group: group, Version: version, Resource: "sandboxes"}

func TestE2BSDKAgainstKubernetes(t *testing.T) {
	project := nodejs.Setup(t, "tests/e2e/js")
	project.Copy(t, "lib.mjs", "kube.test.mjs")

	apiserverBin := testbin.Path(t, "SANDBOX_APISERVER", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver")
	proxyBin := testbin.Path(t, "SANDBOX_ENVD_PROXY", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-envd-proxy")
	if _, err := cluster.APIServerBinary(); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	c, err := cluster.StartContext(ctx, filepath.Join(dir, "cluster"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("stop cluster: %v", err)
		}
	})
	if err := c.InstallCRDs(ctx, crds.NodeInventoryYAML); err != nil {
		t.Fatal(err)
	}

	token := harness.RandomHex(t)
	envdSecret := harness.RandomHex(t)
	keyA, keyB := "e2b_"+harness.RandomHex(t), "e2b_"+harness.RandomHex(t)
	tokenFile := harness.WriteFile(t, dir, "sandboxd-token", token+"\n")
	secretFile := harness.WriteFile(t, dir, "envd-secret", envdSecret+"\n")
	keyFile := harness.WriteFile(t, dir, "e2b-keys", fmt.Sprintf("# key namespace\n%s %s\n%s %s\n", keyA, teamA, keyB, teamB))
	aliasFile := harness.WriteFile(t, dir, "e2b-aliases", fmt.Sprintf("%s %s\n", aliasBase, imageBase))

	f, err := fleet.Start(context.Background(), fleet.Config{
		Nodes:     3,
		RootToken: token,
		// The SDK asks for internet access unless told otherwise, which
		// the surface maps to the egress lane.
		EgressAttachment: true,
		EchoPorts:        []int{},
		Envd:             &fleet.EnvdConfig{Secret: []byte(envdSecret)},
		ScratchRoot:      filepath.Join(dir, "scratch"),
		Publish:          &fleet.PublishConfig{Client: c.Dynamic(), Interval: time.Second},
		Customize: func(i int, cfg *node.Config) {
			cfg.Pools = []sandboxd.PoolSpec{
				{Template: imageBase, Net: "egress", Warm: 3},
				{Template: imageBase, Net: "none", Warm: 2},
				{Template: imageDirect, Net: "egress", Warm: 2},
			}
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close fleet: %v", err)
		}
	})

	dnsName := apiServiceName + "." + apiNamespace + ".svc"
	certs, err := cluster.NewServingCerts(dir, dnsName)
	if err != nil {
		t.Fatal(err)
	}
	addr, err := c.RegisterAPIService(ctx, cluster.APIServiceSpec{
		Group: group, Version: version,
		Namespace: apiNamespace, ServiceName: apiServiceName,
		CABundle: certs.CAPEM,
	})
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := net.SplitHostPort(addr)
	e2bAddr := harness.FreeAddr(t)
	proxyAddr := harness.FreeAddr(t)
	kubeconfig := c.Kubeconfig()

	apiserver := start(t, "sandbox-apiserver", apiserverBin, dir, []string{
		"--bind-address=" + host,
		"--secure-port=" + port,
		"--tls-cert-file=" + certs.CertFile,
		"--tls-private-key-file=" + certs.KeyFile,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--sandboxd-token-file=" + tokenFile,
		"--enable-warm-pool-driver=false",
		"--enable-e2b-api",
		"--e2b-bind-address=" + e2bAddr,
		"--e2b-domain=" + domain,
		"--e2b-namespace=" + teamA,
		"--e2b-api-key-file=" + keyFile,
		"--e2b-template-alias-file=" + aliasFile,
		"--e2b-envd-secret-file=" + secretFile,
	})
	proxy := start(t, "sandbox-envd-proxy", proxyBin, dir, []string{
		"--bind-address=" + proxyAddr,
		"--domain=" + domain,
		"--namespace=",
		"--kubeconfig=" + kubeconfig,
		"--e2b-envd-secret-file=" + secretFile,
		"--sandboxd-token-file=" + tokenFile,
	})

	if err := c.WaitAPIServiceAvailable(ctx, cluster.APIServiceName(group, version)); err != nil {
		t.Fatalf("%v\n%s", err, apiserver.LogTail(60))
	}
	harness.WaitHealthy(t, ctx, apiserver, "http://"+e2bAddr+"/health")
	harness.WaitHealthy(t, ctx, proxy, "http://"+proxyAddr+"/healthz")
	waitPublished(t, ctx, c, f)

	report := filepath.Join(dir, "report.json")
	suiteCtx, suiteCancel := context.WithTimeout(context.Background(), suiteTimeout)
	defer suiteCancel()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("sandbox-apiserver log:\n%s", apiserver.LogTail(80))
			t.Logf("sandbox-envd-proxy log:\n%s", proxy.LogTail(80))
		}
	})
	project.Run(t, suiteCtx, []string{
		"E2B_API_URL=http://" + e2bAddr,
		"E2B_SANDBOX_URL=http://" + proxyAddr,
		"E2B_DOMAIN=" + domain,
		"E2B_API_KEY=" + keyA,
		"E2E_OTHER_KEY=" + keyB,
		"E2E_TEMPLATE=" + imageDirect,
		"E2E_REPORT=" + report,
	}, "--test", "--test-reporter=spec", "--test-concurrency=1", "kube.test.mjs")

	// The sandbox the suite kept is a Sandbox in the key's namespace, seen
	// through the kube-apiserver like any other.
	var facts struct {
		KeptID string `json:"keptId"`
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatalf("the suite wrote no report: %v", err)
	}
	if err := json.Unmarshal(b, &facts); err != nil || facts.KeptID == "" {
		t.Fatalf("report %s: %v", b, err)
	}
	sandboxes := c.Dynamic().Resource(sandboxGVR)
	list, err := sandboxes.Namespace(teamA).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var name string
	for _, item := range list.Items {
		if id := item.GetAnnotations()["sandbox.cocoonstack.io/id"]; sandbox.SameID(id, facts.KeptID) {
			name = item.GetName()
		}
	}
	if name == "" {
		t.Fatalf("sandbox %s created through e2b is not among %d Sandboxes in %s", facts.KeptID, len(list.Items), teamA)
	}
	other, err := sandboxes.Namespace(teamB).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, item := range other.Items {
		if sandbox.SameID(item.GetAnnotations()["sandbox.cocoonstack.io/id"], facts.KeptID) {
			t.Fatalf("sandbox %s also appears in %s", facts.KeptID, teamB)
		}
	}

	// Deleting it through Kubernetes ends it for e2b too.
	if err := sandboxes.Namespace(teamA).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, pollEvery, time.Minute, true, func(ctx context.Context) (bool, error) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+e2bAddr+"/sandboxes/"+facts.KeptID, nil)
		req.Header.Set("X-API-KEY", keyA)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusNotFound, nil
	})
	if err != nil {
		t.Fatalf("sandbox %s deleted through Kubernetes is still served by the e2b surface: %v", facts.KeptID, err)
	}
}

func start(t *testing.T, name, binary, dir string, args []string) *testbin.Process {
	p, err := testbin.StartProcess(name, binary, filepath.Join(dir, name+".log"), args, []string{"OPERATOR_LOG_LEVEL=debug"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(20 * time.Second); err != nil {
			t.Errorf("stop %s: %v\n%s", name, err, p.LogTail(40))
		}
	})
	return p
}

// waitPublished waits until every node's NodeInventory shows its pools
// full, so the suite's first create finds them.
func waitPublished(t *testing.T, ctx context.Context, c *cluster.Cluster, f *fleet.Fleet) {
	t.Helper()
	api := c.Dynamic().Resource(v1beta1.NodeInventoryGVR)
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		for _, n := range f.Nodes() {
			u, err := api.Get(ctx, n.Name(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			pools, _ := u.Object["pools"].([]any)
			if len(pools) < 3 {
				return false, nil
			}
			for _, p := range pools {
				pm, _ := p.(map[string]any)
				if w, _ := pm["warm"].(int64); w == 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(errors.Join(errors.New("fleet inventory never showed full pools"), err))
	}
}
