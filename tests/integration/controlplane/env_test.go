// Package controlplane_test crashes parts of the control plane under
// sandbox-apiserver while a steady load of creates, deletes and lists runs
// through the kube-apiserver's aggregator, and checks what the load saw and
// what the fleet holds afterwards: the kube-apiserver is SIGKILLed and
// started again on the same port (TestKubeAPIServerRestart), and the etcd
// under it is stopped for a few seconds and started again on the same URL
// and data (TestEtcdRestart). The network path from the server to one
// node is cut while the node keeps publishing (TestNodeCutOffFromTheServer).
//
// Everything is real: a kube-apiserver process with an embedded etcd
// (tests/cluster), the sandbox-apiserver binary behind the aggregator
// (tests/apiserverenv) and a simulated sandboxd fleet publishing
// NodeInventory objects. One environment serves the tests, which run one
// after another; each starts by checking the environment answers, and
// deletes what it created.
package controlplane_test

import (
	"fmt"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/faultlink"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// The fleet: fleetNodes nodes, each with one pool of templateBase. The
// simulator refills a pool at once (RefillDelay 0) and the nodes cap no
// claims, so the load (a few hundred creates, half of them deleted again)
// never runs out of warm VMs: every create failure the tests see comes
// from the fault, not from capacity.
const (
	fleetNodes   = 3
	templateBase = "base"
	warmPerNode  = 4
)

// linkedNode is the node the server reaches only through a faultlink.Link,
// which TestNodeCutOffFromTheServer cuts; the node itself publishes to the
// kube-apiserver directly, as a node does over its own path.
const linkedNode = fleetNodes - 1

// serverNodeTimeout is the server's --node-timeout: the longest a node
// that does not answer holds one of its calls.
const serverNodeTimeout = 2 * time.Second

// publishInterval is how often nodes publish their NodeInventory: often,
// so that a claim reaches the server's informer within a second or two
// once the control plane is back.
const publishInterval = time.Second

// Timeouts are generous: a loaded two-core machine is several times slower
// than an idle one, and every wait polls for its condition.
const (
	// setupTimeout bounds starting the cluster, fleet and server (binaries
	// are located or built before it starts).
	setupTimeout = 3 * time.Minute
	// waitTimeout bounds each wait of a test for a condition.
	waitTimeout = 90 * time.Second
	pollEvery   = 100 * time.Millisecond
)

// logTailLines is how much of the server's log a failure shows.
const logTailLines = 80

// testEnv is the cluster, fleet and server both tests share.
type testEnv struct {
	stack   *apiserverenv.Stack
	dir     string
	cluster *cluster.Cluster
	fleet   *simfleet.Fleet
	server  *apiserverenv.Server
	// rootToken is the fleet's sandboxd root token, for claiming on a node
	// directly (behind the server's back) to change a NodeInventory.
	rootToken string
	// link is the server's only path to node linkedNode.
	link *faultlink.Link
}

var (
	envOnce   sync.Once
	shared    *testEnv
	sharedErr error
)

// sharedEnv starts the environment on first use and returns it; a test
// that fails logs the tails of the servers' logs.
func sharedEnv(t *testing.T) *testEnv {
	t.Helper()
	envOnce.Do(func() { shared, sharedErr = startEnv() })
	if sharedErr != nil {
		t.Fatalf("start the test environment: %v", sharedErr)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(shared.logTail())
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
	direct, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	l, err := faultlink.Start("127.0.0.1:0", direct)
	if err != nil {
		return nil, err
	}
	st, err := apiserverenv.StartStack(apiserverenv.StackOptions{
		DirPrefix: "sandbox-controlplane-it-",
		Fleet: simfleet.Config{
			Nodes:     fleetNodes,
			EchoPorts: []int{},
			Pools:     []sandboxd.PoolSpec{{Template: templateBase, Warm: warmPerNode}},
			// The linked node listens on direct and advertises the link:
			// its NodeInventory sends the server through it.
			Customize: func(i int, cfg *node.Config) {
				if i == linkedNode {
					cfg.ListenAddr, cfg.AdvertiseAddr = direct, l.Addr()
				}
			},
		},
		PublishInterval: publishInterval,
		MinPools:        1,
		SetupTimeout:    setupTimeout,
		Server:          apiserverenv.Options{ExtraArgs: []string{"--node-timeout=" + serverNodeTimeout.String()}},
	})
	if err != nil {
		l.Close()
		return nil, err
	}
	return &testEnv{stack: st, dir: st.Dir, cluster: st.Cluster, fleet: st.Fleet, server: st.Server, rootToken: st.RootToken, link: l}, nil
}

// freeLoopbackAddr is a loopback address with a port free at the moment.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// stop stops the server, the fleet and the cluster, and removes the
// directory; then the link.
func (e *testEnv) stop() error {
	err := e.stack.Stop()
	e.link.Close()
	return err
}

// logTail is the end of the sandbox-apiserver's, kube-apiserver's and
// etcd's logs.
func (e *testEnv) logTail() string { return e.stack.LogTail(logTailLines) }
