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
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// The aggregated API, as the tests spell it in paths.
const (
	group   = apiserverenv.Group
	version = apiserverenv.Version
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

// The fleet. Node names are simfleet.Config's default "sim-node-<i>".
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

// testEnv is the cluster, fleet and server every test shares.
type testEnv struct {
	stack   *apiserverenv.Stack
	dir     string
	cluster *cluster.Cluster
	fleet   *simfleet.Fleet
	server  *apiserverenv.Server
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
func startEnv() (*testEnv, error) {
	st, err := apiserverenv.StartStack(apiserverenv.StackOptions{
		DirPrefix:       "sandbox-apiserver-it-",
		Fleet:           fleetConfig(),
		PublishInterval: publishInterval,
		Server: apiserverenv.Options{
			InventoryStaleAfter: staleAfter,
			// Serve CBOR besides JSON (TestListCBOR).
			ExtraArgs: []string{"--feature-gates=CBORServingAndStorage=true"},
		},
		// The nodes keep one or two pools each (see fleetConfig): no
		// minimum.
		MinPools:     0,
		SetupTimeout: setupTimeout,
	})
	if err != nil {
		return nil, err
	}
	return &testEnv{
		stack: st, dir: st.Dir, cluster: st.Cluster, fleet: st.Fleet, server: st.Server,
		sandboxes: st.Cluster.Dynamic().Resource(apiserverenv.SandboxGVR),
		raw:       st.Cluster.Clientset().Discovery().RESTClient(),
	}, nil
}

// fleetConfig is the fleet every test shares (see the node constants).
func fleetConfig() simfleet.Config {
	return simfleet.Config{
		Nodes:     fleetNodes,
		EchoPorts: []int{},
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
	}
}

// unstructuredSlice is obj[field] as a list, whether it is there, and an
// error when it is something else.
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
func (e *testEnv) stop() error { return e.stack.Stop() }

// logTail is the end of the sandbox-apiserver's, kube-apiserver's and
// etcd's logs.
func (e *testEnv) logTail() string { return e.stack.LogTail(logTailLines) }

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
	return dyn.Resource(apiserverenv.SandboxGVR), cs
}

// logTailLines is how much of the server's log a failure shows.
const logTailLines = 80
