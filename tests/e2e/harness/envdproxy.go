package harness

import (
	"context"
	"net"
	"path/filepath"
	"sync/atomic"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// EnvdProxyConfig is one bare sandbox-envd-proxy replica: the data plane
// alone, reading NodeInventory from a cluster, with no sandbox-apiserver
// in front of it. Several replicas started from the same config (each
// with its own Name) read the same inventory, as replicas behind one
// Service do.
type EnvdProxyConfig struct {
	// Binary is sandbox-envd-proxy.
	Binary string
	// Name labels the replica's log (Dir/<Name>.log) and errors; it must
	// differ between replicas sharing Dir.
	Name, Dir string
	// Kubeconfig is the cluster whose NodeInventory objects are read.
	Kubeconfig string
	// Domain is --domain.
	Domain string
	// TokenFile holds the nodes' root token, EnvdSecretFile the envd
	// secret access tokens derive from.
	TokenFile, EnvdSecretFile string
	// Metrics serves --metrics-bind-address on a port of its own
	// (EnvdProxy.MetricsAddr).
	Metrics bool
	// Args are more flags (limits, say); a later flag wins over the
	// defaults set here.
	Args []string
}

// EnvdProxy is a running replica.
type EnvdProxy struct {
	// Addr is the replica's cleartext (HTTP/1.1 and h2c) listener;
	// MetricsAddr its metrics listener, empty unless Metrics was asked for.
	Addr, MetricsAddr string
	Proc              *testbin.Process
	// killed is set by Kill: the process is meant to be gone at the end.
	killed atomic.Bool
}

// Kill ends the replica with SIGKILL, as a crashed or OOM-killed pod
// would end: no drain, every connection it held closed by the kernel.
func (p *EnvdProxy) Kill() error {
	p.killed.Store(true)
	return p.Proc.Kill()
}

// StartEnvdProxy starts one replica, reading every namespace's inventory
// (--namespace=""), and returns once its /healthz answers, which it does
// only after its NodeInventory informer synced. It is stopped with SIGTERM
// when the test ends and must have run until then, unless Kill ended it.
func StartEnvdProxy(t testing.TB, ctx context.Context, cfg EnvdProxyConfig) *EnvdProxy {
	t.Helper()
	p := &EnvdProxy{}
	var ln *net.TCPListener
	ln, p.Addr = Listen(t)
	listeners := []*net.TCPListener{ln}
	args := []string{
		"--bind-address=" + p.Addr,
		"--domain=" + cfg.Domain,
		"--namespace=",
		"--kubeconfig=" + cfg.Kubeconfig,
		"--e2b-envd-secret-file=" + cfg.EnvdSecretFile,
		"--sandboxd-token-file=" + cfg.TokenFile,
	}
	if cfg.Metrics {
		ln, p.MetricsAddr = Listen(t)
		listeners = append(listeners, ln)
		args = append(args, "--metrics-bind-address="+p.MetricsAddr)
	}
	args = append(args, cfg.Args...)
	proc, err := testbin.StartProcess(cfg.Name, cfg.Binary, filepath.Join(cfg.Dir, cfg.Name+".log"), args,
		[]string{"OPERATOR_LOG_LEVEL=debug"}, listeners...)
	if err != nil {
		t.Fatal(err)
	}
	p.Proc = proc
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", proc.LogTail(80))
		}
		if p.killed.Load() {
			return
		}
		if err := proc.Stop(stopGrace); err != nil {
			t.Errorf("stop %s: %v\n%s", cfg.Name, err, proc.LogTail(40))
		}
	})
	WaitHealthy(t, ctx, proc, "http://"+p.Addr+"/healthz")
	return p
}
