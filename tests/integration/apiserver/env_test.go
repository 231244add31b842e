// Package apiserver_test runs the sandbox-apiserver binary as an aggregated
// apiserver behind a real kube-apiserver and drives it only through the
// kube-apiserver, as kubectl and client-go would: the aggregator verifies
// the server's certificate against the APIService's caBundle, dials it at
// its Service's ClusterIP, and passes the caller's identity on; the server
// authenticates and authorizes by delegation, reads NodeInventory objects
// published by a simulated sandboxd fleet, and claims from those nodes.
//
// One cluster, fleet and server serve every test and benchmark in the
// package (see sharedEnv); tests run one after another and each cleans up
// the sandboxes it creates.
package apiserver_test

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/apis/sandbox/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/fleet"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// The aggregated API and where the test cluster routes it.
const (
	group   = "agents.x-k8s.io"
	version = "v1beta1"

	apiNamespace   = "sandbox-system"
	apiServiceName = "sandbox-apiserver"

	binaryEnv = "SANDBOX_APISERVER"
	binaryPkg = "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver"
)

// Inventory timing: nodes publish every second and the server drops a node
// five seconds behind the fleet, so the freshness test takes seconds.
const (
	publishInterval = time.Second
	staleAfter      = 5 * time.Second
)

// Timeouts are generous: a loaded two-core machine is several times slower
// than an idle one, and every wait polls for its condition.
const (
	// setupTimeout bounds starting the cluster, fleet and server (binaries
	// are located or built before it starts).
	setupTimeout = 3 * time.Minute
	// waitTimeout bounds each test's waits and requests.
	waitTimeout = 90 * time.Second
	pollEvery   = 100 * time.Millisecond
)

// The fleet. Node names are fleet.Config's default "sim-node-<i>".
//
//   - nodeSmall holds at most smallMaxClaims sandboxes and keeps the most
//     warm "base" VMs, so the server tries it first whenever the node
//     choice draws it, and falls through to the others once it is full.
//   - nodeBig1 and nodeBig2 serve "base" and the image imagePython.
//   - nodeVictim serves only templateVictim, so the freshness test can put
//     a sandbox on it, and only it, before killing it.
const (
	nodeSmall  = 0
	nodeBig1   = 1
	nodeBig2   = 2
	nodeVictim = 3
	fleetNodes = 4

	templateBase   = "base"
	imagePython    = "python:3.12"
	templateVictim = "victim"

	smallMaxClaims = 2
	bigMaxClaims   = 8
	// Warm targets. The simulator refills instantly (RefillDelay 0), so
	// the published warm counts stay at these values.
	smallWarm = 4
	bigWarm   = 3
)

var sandboxGVR = schema.GroupVersionResource{Group: group, Version: version, Resource: "sandboxes"}

// testEnv is the cluster, fleet and server every test shares.
type testEnv struct {
	dir     string
	cluster *cluster.Cluster
	fleet   *fleet.Fleet
	server  *serverProcess
	// sandboxes is the admin's dynamic client for sandboxes.
	sandboxes dynamic.NamespaceableResourceInterface
	// raw is the admin's REST client, for subresources and for requests
	// that must not be retried.
	raw rest.Interface
}

var (
	envOnce   sync.Once
	shared    *testEnv
	sharedErr error
)

// sharedEnv starts the environment on first use and returns it; tests and
// benchmarks that fail log the tails of the servers' logs.
func sharedEnv(tb testing.TB) *testEnv {
	tb.Helper()
	envOnce.Do(func() { shared, sharedErr = startEnv() })
	if sharedErr != nil {
		tb.Fatalf("start the test environment: %v", sharedErr)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Log(shared.logTail())
		}
	})
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		if err := shared.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "stop the test environment: %v\n", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// startEnv starts everything or, on error, stops what it started.
func startEnv() (_ *testEnv, err error) {
	// Locating (under go test: building) the binaries happens outside the
	// start-up deadline, since a first build takes minutes.
	binary, err := testbin.Locate(binaryEnv, binaryPkg, "")
	if err != nil {
		return nil, err
	}
	if _, err := cluster.APIServerBinary(); err != nil {
		return nil, err
	}

	dir, err := os.MkdirTemp("", "sandbox-apiserver-it-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	e := &testEnv{dir: dir}
	defer func() {
		if err != nil {
			tail := e.logTail()
			if stopErr := e.stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			err = fmt.Errorf("%w\n%s", err, tail)
		}
	}()

	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if e.cluster, err = cluster.StartContext(ctx, filepath.Join(dir, "cluster")); err != nil {
		return nil, err
	}
	if err := e.cluster.InstallCRDs(ctx, crds.NodeInventoryYAML); err != nil {
		return nil, err
	}
	e.sandboxes = e.cluster.Dynamic().Resource(sandboxGVR)
	e.raw = e.cluster.Clientset().Discovery().RESTClient()

	tokenFile, token, err := writeToken(dir)
	if err != nil {
		return nil, err
	}
	if e.fleet, err = startFleet(e.cluster.Dynamic(), token); err != nil {
		return nil, err
	}

	dnsName := apiServiceName + "." + apiNamespace + ".svc"
	certs, err := cluster.NewServingCerts(dir, dnsName)
	if err != nil {
		return nil, err
	}
	addr, err := e.cluster.RegisterAPIService(ctx, cluster.APIServiceSpec{
		Group: group, Version: version,
		Namespace: apiNamespace, ServiceName: apiServiceName,
		CABundle: certs.CAPEM,
	})
	if err != nil {
		return nil, err
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("APIService address %q: %w", addr, err)
	}
	kubeconfig := e.cluster.Kubeconfig()
	e.server, err = startServer(binary, filepath.Join(dir, "sandbox-apiserver.log"), []string{
		"--bind-address=" + host,
		"--secure-port=" + port,
		"--tls-cert-file=" + certs.CertFile,
		"--tls-private-key-file=" + certs.KeyFile,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--sandboxd-token-file=" + tokenFile,
		"--inventory-stale-after=" + staleAfter.String(),
		// The tests set the fleet's pools themselves. The warm-pool driver
		// would manage them from SandboxWarmPool objects, whose CRD this
		// cluster does not serve.
		"--enable-warm-pool-driver=false",
	})
	if err != nil {
		return nil, err
	}
	if err := e.cluster.WaitAPIServiceAvailable(ctx, cluster.APIServiceName(group, version)); err != nil {
		return nil, err
	}
	if err := e.server.waitReady(ctx, addr, dnsName, certs.CAPEM); err != nil {
		return nil, err
	}
	if err := e.waitFleetPublished(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// writeToken writes a fresh sandboxd root token to a file, as a Secret
// mount would hold it.
func writeToken(dir string) (path, token string, err error) {
	b := make([]byte, 24)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("generate sandboxd token: %w", err)
	}
	token = hex.EncodeToString(b)
	path = filepath.Join(dir, "sandboxd-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("write sandboxd token: %w", err)
	}
	return path, token, nil
}

func startFleet(client dynamic.Interface, token string) (*fleet.Fleet, error) {
	f, err := fleet.Start(context.Background(), fleet.Config{
		Nodes:     fleetNodes,
		RootToken: token,
		EchoPorts: []int{},
		Publish:   &fleet.PublishConfig{Client: client, Interval: publishInterval},
		Customize: func(i int, cfg *node.Config) {
			switch i {
			case nodeSmall:
				cfg.MaxClaims = smallMaxClaims
				cfg.Pools = []sandboxd.PoolSpec{{Template: templateBase, Warm: smallWarm}}
			case nodeVictim:
				cfg.Pools = []sandboxd.PoolSpec{{Template: templateVictim, Warm: bigWarm}}
			default:
				cfg.MaxClaims = bigMaxClaims
				cfg.Pools = []sandboxd.PoolSpec{
					{Template: templateBase, Warm: bigWarm},
					{Template: imagePython, Warm: bigWarm},
				}
			}
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}
	return f, nil
}

// waitFleetPublished waits until every node's NodeInventory shows its
// pools full, so the first create finds the capacity the layout promises.
func (e *testEnv) waitFleetPublished(ctx context.Context) error {
	api := e.cluster.Dynamic().Resource(v1beta1.NodeInventoryGVR)
	last := "nothing published"
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		for _, n := range e.fleet.Nodes() {
			u, err := api.Get(ctx, n.Name(), metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				last = n.Name() + " has not published"
				return false, nil
			}
			if err != nil {
				return false, err
			}
			pools, _, _ := unstructuredSlice(u.Object, "pools")
			for _, p := range pools {
				pm, _ := p.(map[string]any)
				warm, _ := pm["warm"].(int64)
				target, _ := pm["target"].(int64)
				if warm == 0 || warm < target {
					last = fmt.Sprintf("%s publishes pool %v", n.Name(), pm)
					return false, nil
				}
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("fleet inventory (%s): %w", last, err)
	}
	return nil
}

func unstructuredSlice(obj map[string]any, field string) ([]any, bool, error) {
	v, ok := obj[field]
	if !ok {
		return nil, false, nil
	}
	s, ok := v.([]any)
	if !ok {
		return nil, true, fmt.Errorf("%s is %T", field, v)
	}
	return s, true, nil
}

// stop stops the server, the fleet and the cluster, and removes the
// directory.
func (e *testEnv) stop() error {
	var errs []error
	if e.server != nil {
		errs = append(errs, e.server.stop())
	}
	if e.fleet != nil {
		errs = append(errs, e.fleet.Close())
	}
	if e.cluster != nil {
		errs = append(errs, e.cluster.Stop())
	}
	errs = append(errs, os.RemoveAll(e.dir))
	return errors.Join(errs...)
}

// logTail is the end of the sandbox-apiserver's, kube-apiserver's and
// etcd's logs.
func (e *testEnv) logTail() string {
	var b strings.Builder
	if e.server != nil {
		b.WriteString(e.server.logTail())
	}
	if e.cluster != nil {
		b.WriteString(e.cluster.LogTail())
	}
	return b.String()
}

// claimed is the number of live claims on the fleet's live nodes.
func (e *testEnv) claimed() int {
	n := 0
	for i, nd := range e.fleet.Nodes() {
		if e.fleet.Alive(i) {
			n += len(nd.Snapshot().Entries)
		}
	}
	return n
}

// nodeClaims is the number of live claims on node i.
func (e *testEnv) nodeClaims(i int) int { return len(e.fleet.Node(i).Snapshot().Entries) }

// nodeName is node i's name, as the server reports it.
func (e *testEnv) nodeName(i int) string { return e.fleet.Node(i).Name() }

// nodeIndex is the index of the named node, or -1.
func (e *testEnv) nodeIndex(name string) int {
	for i, n := range e.fleet.Nodes() {
		if n.Name() == name {
			return i
		}
	}
	return -1
}

// entry is the sandbox with id as its node lists it, and whether it does.
func (e *testEnv) entry(nodeIdx int, id string) (node.EntrySnapshot, bool) {
	for _, en := range e.fleet.Node(nodeIdx).Snapshot().Entries {
		if en.ID == id {
			return en, true
		}
	}
	return node.EntrySnapshot{}, false
}

// userClients returns a dynamic client for sandboxes and a clientset, both
// authenticating as the named cluster user.
func (e *testEnv) userClients(tb testing.TB, user string) (dynamic.NamespaceableResourceInterface, kubernetes.Interface) {
	tb.Helper()
	cfg := e.cluster.UserConfig(user)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	return dyn.Resource(sandboxGVR), cs
}

// serverProcess is the sandbox-apiserver binary running with its output in
// a log file.
// stopGrace is how long the server gets to shut down after SIGTERM.
const stopGrace = 20 * time.Second

// serverProcess is the sandbox-apiserver under test.
type serverProcess struct{ *testbin.Process }

func startServer(binary, logPath string, args []string) (*serverProcess, error) {
	p, err := testbin.StartProcess("sandbox-apiserver", binary, logPath, args, []string{"OPERATOR_LOG_LEVEL=info"})
	if err != nil {
		return nil, err
	}
	return &serverProcess{p}, nil
}

// waitReady polls the server's /readyz (which includes inventory-synced)
// over TLS, verifying the serving certificate as the aggregator does. It
// ends early when the process exits.
func (p *serverProcess) waitReady(ctx context.Context, addr, serverName string, caPEM []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	last := "no answer yet"
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		if err := p.ExitErr(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("sandbox-apiserver not ready (%s): %w", last, err)
	}
	return nil
}

// stop stops the server; a server that had already died is an error.
func (p *serverProcess) stop() error { return p.Stop(stopGrace) }

// logTailLines is how much of the server's log a failure shows.
const logTailLines = 80

func (p *serverProcess) logTail() string { return p.LogTail(logTailLines) }
