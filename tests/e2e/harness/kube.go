package harness

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// The aggregated API sandbox-apiserver serves, and the Service the
// kube-apiserver routes it through.
const (
	KubeAPIGroup     = "agents.x-k8s.io"
	KubeAPIVersion   = "v1beta1"
	kubeAPINamespace = "sandbox-system"
	kubeAPIService   = "sandbox-apiserver"
)

// LocateKubeAPIServer finds the kube-apiserver binary, which under plain go
// test means building it: minutes with a cold build cache. Call it before
// the clock of a start-up bound starts.
func LocateKubeAPIServer(t testing.TB) {
	t.Helper()
	if _, err := cluster.APIServerBinary(); err != nil {
		t.Fatal(err)
	}
}

// StartCluster starts a real kube-apiserver (over an etcd in this process)
// with its files under dir/cluster and the NodeInventory CRD installed.
// ctx bounds the start-up (locate the binary first, LocateKubeAPIServer);
// the cluster is stopped when the test ends, after everything the test
// starts later.
func StartCluster(t testing.TB, ctx context.Context, dir string) *cluster.Cluster {
	t.Helper()
	LocateKubeAPIServer(t)
	cdir := filepath.Join(dir, "cluster")
	if err := os.MkdirAll(cdir, 0o700); err != nil {
		t.Fatal(err)
	}
	c, err := cluster.StartContext(ctx, cdir)
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
	return c
}

// KubeE2BConfig is what the Kubernetes front of the e2b API is started
// with: sandbox-apiserver serving the aggregated API and the e2b surface,
// and sandbox-envd-proxy as the data plane.
type KubeE2BConfig struct {
	// APIServer and EnvdProxy are the binaries.
	APIServer, EnvdProxy string
	// Dir holds the servers' logs and serving certificates.
	Dir string
	// Namespace is --e2b-namespace; Domain the e2b domain of both.
	Namespace, Domain string
	// The files both read: the nodes' root token and the envd secret;
	// and sandbox-apiserver's API keys and template aliases.
	TokenFile, EnvdSecretFile, APIKeyFile, AliasFile string
	// Args are more sandbox-apiserver flags, Env more of its environment.
	Args, Env []string
	// ProxyMetrics gives sandbox-envd-proxy a metrics listener
	// (KubeE2B.ProxyMetricsAddr).
	ProxyMetrics bool
}

// KubeE2B is a running Kubernetes front.
type KubeE2B struct {
	// APIAddr is the e2b REST surface (E2B_API_URL), ProxyAddr the data
	// plane (E2B_SANDBOX_URL).
	APIAddr, ProxyAddr string
	// SecureAddr is the aggregated API's own address (its /metrics);
	// ProxyMetricsAddr the proxy's metrics listener, with ProxyMetrics.
	SecureAddr, ProxyMetricsAddr string
	APIServer, Proxy             *testbin.Process
}

// StartKubeE2B registers sandbox-apiserver's APIService with c, starts it
// and sandbox-envd-proxy, and returns once the APIService is available and
// both answer their health checks. Both are stopped when the test ends.
func StartKubeE2B(t testing.TB, ctx context.Context, c *cluster.Cluster, cfg KubeE2BConfig) *KubeE2B {
	t.Helper()
	certs, err := cluster.NewServingCerts(cfg.Dir, kubeAPIService+"."+kubeAPINamespace+".svc")
	if err != nil {
		t.Fatal(err)
	}
	secureListener, err := c.RegisterAPIService(ctx, cluster.APIServiceSpec{
		Group: KubeAPIGroup, Version: KubeAPIVersion,
		Namespace: kubeAPINamespace, ServiceName: kubeAPIService,
		CABundle: certs.CAPEM,
	})
	if err != nil {
		t.Fatal(err)
	}
	// Every socket is handed over bound: the aggregated API's (bound at its
	// Service's address), the e2b surface's and the proxy's.
	host, port, _ := net.SplitHostPort(secureListener.Addr().String())
	apiListener, apiAddr := Listen(t)
	proxyListener, proxyAddr := Listen(t)
	k := &KubeE2B{APIAddr: apiAddr, ProxyAddr: proxyAddr, SecureAddr: secureListener.Addr().String()}
	kubeconfig := c.Kubeconfig()
	k.APIServer = StartProcess(t, "sandbox-apiserver", cfg.APIServer, cfg.Dir, append([]string{
		"--bind-address=" + host,
		"--secure-port=" + port,
		"--tls-cert-file=" + certs.CertFile,
		"--tls-private-key-file=" + certs.KeyFile,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--sandboxd-token-file=" + cfg.TokenFile,
		"--enable-warm-pool-driver=false",
		"--enable-e2b-api",
		"--e2b-bind-address=" + k.APIAddr,
		"--e2b-domain=" + cfg.Domain,
		"--e2b-namespace=" + cfg.Namespace,
		"--e2b-api-key-file=" + cfg.APIKeyFile,
		"--e2b-template-alias-file=" + cfg.AliasFile,
		"--e2b-envd-secret-file=" + cfg.EnvdSecretFile,
	}, cfg.Args...), cfg.Env, secureListener, apiListener)
	proxyArgs := []string{
		"--bind-address=" + k.ProxyAddr,
		"--domain=" + cfg.Domain,
		"--namespace=",
		"--kubeconfig=" + kubeconfig,
		"--e2b-envd-secret-file=" + cfg.EnvdSecretFile,
		"--sandboxd-token-file=" + cfg.TokenFile,
	}
	proxyListeners := []*net.TCPListener{proxyListener}
	if cfg.ProxyMetrics {
		var metricsListener *net.TCPListener
		metricsListener, k.ProxyMetricsAddr = Listen(t)
		proxyArgs = append(proxyArgs, "--metrics-bind-address="+k.ProxyMetricsAddr)
		proxyListeners = append(proxyListeners, metricsListener)
	}
	k.Proxy = StartProcess(t, "sandbox-envd-proxy", cfg.EnvdProxy, cfg.Dir, proxyArgs, nil, proxyListeners...)
	if err := c.WaitAPIServiceAvailable(ctx, cluster.APIServiceName(KubeAPIGroup, KubeAPIVersion)); err != nil {
		t.Fatalf("%v\n%s", err, k.APIServer.LogTail(60))
	}
	WaitHealthy(t, ctx, k.APIServer, "http://"+k.APIAddr+"/health")
	WaitHealthy(t, ctx, k.Proxy, "http://"+k.ProxyAddr+"/healthz")
	return k
}

// WaitInventory waits until each named node's NodeInventory lists at least
// pools pools, each with warm VMs, so a suite's first create finds them.
func WaitInventory(t testing.TB, ctx context.Context, c *cluster.Cluster, nodes []string, pools int) {
	t.Helper()
	api := c.Dynamic().Resource(v1beta1.NodeInventoryGVR)
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		for _, name := range nodes {
			u, err := api.Get(ctx, name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			listed, _ := u.Object["pools"].([]any)
			if len(listed) < pools {
				return false, nil
			}
			for _, p := range listed {
				pm, _ := p.(map[string]any)
				if w, _ := pm["warm"].(int64); w == 0 {
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(errors.Join(errors.New("the nodes' NodeInventory never showed full pools"), err))
	}
}
