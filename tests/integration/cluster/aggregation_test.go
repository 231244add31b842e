package cluster_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	certutil "k8s.io/client-go/util/cert"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

const (
	probeGroup   = "probe.test.cocoonstack.io"
	probeVersion = "v1"
	probePath    = "/apis/" + probeGroup + "/" + probeVersion
)

// seenRequest is what the probe server learned about one request.
type seenRequest struct {
	path     string
	user     string
	groups   []string
	clientCN string
}

// probeServer stands in for an aggregated apiserver: it serves discovery
// for the probe group and records who the aggregator says is calling. It
// accepts only clients whose certificate chains to the front-proxy CA the
// cluster publishes, as a real aggregated server does.
type probeServer struct {
	mu   sync.Mutex
	seen []seenRequest
}

func (p *probeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	req := seenRequest{
		path:   r.URL.Path,
		user:   r.Header.Get("X-Remote-User"),
		groups: r.Header.Values("X-Remote-Group"),
	}
	if len(r.TLS.VerifiedChains) > 0 {
		req.clientCN = r.TLS.VerifiedChains[0][0].Subject.CommonName
	}
	p.mu.Lock()
	p.seen = append(p.seen, req)
	p.mu.Unlock()

	if r.URL.Path != probePath {
		http.NotFound(w, r)
		return
	}
	list := metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: probeGroup + "/" + probeVersion,
		APIResources: []metav1.APIResource{{Name: "probes", Kind: "Probe", Namespaced: true, Verbs: []string{"get"}}},
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(list)
}

func (p *probeServer) all() []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.seen)
}

// requestsFrom returns the recorded requests for path made on behalf of
// user.
func (p *probeServer) requestsFrom(user, path string) []seenRequest {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []seenRequest
	for _, r := range p.seen {
		if r.user == user && r.path == path {
			out = append(out, r)
		}
	}
	return out
}

func testAggregatedAPI(t *testing.T, c *cluster.Cluster) {
	ctx := testContext(t)

	// The front-proxy CA as an aggregated server finds it: in the
	// ConfigMap the kube-apiserver publishes, matching the CA the cluster
	// generated.
	cm, err := c.Clientset().CoreV1().ConfigMaps(cluster.ExtensionAuthNamespace).Get(ctx, cluster.ExtensionAuthConfigMap, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	frontProxyCA := cm.Data[cluster.ExtensionAuthFrontProxyCAKey]
	if frontProxyCA != string(c.FrontProxyCAData()) {
		t.Fatalf("published front-proxy CA differs from the cluster's:\n%s", frontProxyCA)
	}
	var allowed []string
	if err := json.Unmarshal([]byte(cm.Data["requestheader-allowed-names"]), &allowed); err != nil || !slices.Equal(allowed, []string{cluster.FrontProxyClientName}) {
		t.Fatalf("published requestheader-allowed-names = %q (%v)", cm.Data["requestheader-allowed-names"], err)
	}
	clientCAs := x509.NewCertPool()
	if !clientCAs.AppendCertsFromPEM([]byte(frontProxyCA)) {
		t.Fatal("no certificate in the published front-proxy CA")
	}

	// The aggregator verifies the server as <service>.<namespace>.svc
	// against the APIService's caBundle.
	const namespace, service = "probe-system", "probe"
	certPEM, keyPEM, err := certutil.GenerateSelfSignedCertKey(service+"."+namespace+".svc", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	serving, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}

	l, err := c.RegisterAPIService(ctx, cluster.APIServiceSpec{
		Group: probeGroup, Version: probeVersion,
		Namespace: namespace, ServiceName: service,
		CABundle: certPEM,
	})
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() || host == "127.0.0.1" {
		t.Fatalf("bind address %s is not a loopback ClusterIP other than the kubernetes Service's", addr)
	}
	svc, err := c.Clientset().CoreV1().Services(namespace).Get(ctx, service, metav1.GetOptions{})
	if err != nil || svc.Spec.ClusterIP != host {
		t.Fatalf("Service %s/%s clusterIP = %v (%v), want %s", namespace, service, svc.Spec.ClusterIP, err, host)
	}

	probe := &probeServer{}
	srv := httptest.NewUnstartedServer(probe)
	srv.Listener.Close()
	srv.Listener = l
	srv.TLS = &tls.Config{
		Certificates: []tls.Certificate{serving},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    clientCAs,
		MinVersion:   tls.VersionTLS12,
	}
	srv.StartTLS()
	t.Cleanup(srv.Close)

	if err := c.WaitAPIServiceAvailable(ctx, cluster.APIServiceName(probeGroup, probeVersion)); err != nil {
		t.Fatal(err)
	}

	// Through the kube-apiserver as the admin.
	body, err := c.Clientset().Discovery().RESTClient().Get().AbsPath(probePath).DoRaw(ctx)
	if err != nil {
		t.Fatalf("GET %s through the aggregator: %v", probePath, err)
	}
	var list metav1.APIResourceList
	if err := json.Unmarshal(body, &list); err != nil || list.GroupVersion != probeGroup+"/"+probeVersion || len(list.APIResources) != 1 || list.APIResources[0].Name != "probes" {
		t.Fatalf("GET %s answered %s (%v), not the probe server's resource list", probePath, body, err)
	}
	seen := probe.requestsFrom(cluster.AdminUser, probePath)
	if len(seen) == 0 {
		t.Fatalf("the probe server saw no request from %s; saw %+v", cluster.AdminUser, probe.all())
	}
	if r := seen[0]; r.clientCN != cluster.FrontProxyClientName || !slices.Contains(r.groups, "system:masters") {
		t.Errorf("admin's request arrived as %+v, want client %s and group system:masters", r, cluster.FrontProxyClientName)
	}

	// Discovery is open to every authenticated user, so alice's request is
	// forwarded too, under her own name.
	alice, err := kubernetes.NewForConfig(c.UserConfig(cluster.UnprivilegedUser))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Discovery().RESTClient().Get().AbsPath(probePath).DoRaw(ctx); err != nil {
		t.Fatalf("alice GET %s: %v", probePath, err)
	}
	if seen := probe.requestsFrom(cluster.UnprivilegedUser, probePath); len(seen) != 1 || !slices.Contains(seen[0].groups, cluster.UnprivilegedGroup) {
		t.Errorf("alice's requests as the probe server saw them: %+v", seen)
	}

	// A resource request is authorized by the kube-apiserver before it is
	// proxied: RBAC stops alice there, and the probe server never hears
	// of it.
	resourcePath := probePath + "/namespaces/default/probes/x"
	_, err = alice.Discovery().RESTClient().Get().AbsPath(resourcePath).DoRaw(ctx)
	if !apierrors.IsForbidden(err) {
		t.Errorf("alice GET %s: err = %v, want Forbidden", resourcePath, err)
	}
	if seen := probe.requestsFrom(cluster.UnprivilegedUser, resourcePath); len(seen) != 0 {
		t.Errorf("a request RBAC forbids reached the aggregated server: %+v", seen)
	}
}
