package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
)

// Cluster is a running etcd and kube-apiserver on loopback.
type Cluster struct {
	dir        string
	etcd       *etcdServer
	apiserver  *apiServerProcess
	pki        *pki
	files      pkiFiles
	users      userTable
	host       string
	kubeconfig string
	startup    time.Duration

	clientset kubernetes.Interface
	dynamic   dynamic.Interface

	// nodeIP is set when a node (StartNodeCluster) runs kube-proxy for
	// this control plane: aggregated servers then sit behind a Service
	// of the node's own range, reached at nodeIP (apiservice.go).
	nodeIP string

	stopOnce sync.Once
	stopErr  error

	// For restarts (restart.go): procMu guards etcd and apiserver, which a
	// restart replaces, against Stop; apiserverCfg is what the process is
	// started with again; stopped refuses a restart after Stop.
	procMu       sync.Mutex
	apiserverCfg apiServerConfig
	stopped      bool
}

// Start starts a cluster for t with its files under t.TempDir(), failing
// the test if it cannot. The cluster is stopped by a cleanup registered
// here, so anything the test registers later (an aggregated server, say)
// is torn down before it; when the test has failed, the cleanup first logs
// the tail of the kube-apiserver's and etcd's logs.
func Start(t testing.TB, opts ...Option) *Cluster {
	t.Helper()
	c, err := StartContext(context.Background(), t.TempDir(), opts...)
	if err != nil {
		t.Fatalf("start test cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(c.LogTail())
		}
		if err := c.Stop(); err != nil {
			t.Errorf("stop test cluster: %v", err)
		}
	})
	return c
}

// StartContext starts a cluster with its files under dir, which must exist
// and outlive the cluster; the caller stops it with Stop and removes dir.
// ctx bounds only the start-up (as does the start timeout option); the
// cluster runs until Stop. On error everything started is stopped again
// and the error carries the tail of the logs.
func StartContext(ctx context.Context, dir string, opts ...Option) (*Cluster, error) {
	began := time.Now()
	o := newOptions(opts)
	ctx, cancel := context.WithTimeoutCause(ctx, o.startTimeout,
		fmt.Errorf("cluster start-up exceeded %v", o.startTimeout))
	defer cancel()

	c := &Cluster{dir: dir, users: o.users}
	if err := c.start(ctx, o); err != nil {
		tail := c.LogTail()
		if stopErr := c.Stop(); stopErr != nil {
			err = errors.Join(err, stopErr)
		}
		return nil, fmt.Errorf("%w\n%s", err, tail)
	}
	c.startup = time.Since(began)
	return c, nil
}

func (c *Cluster) start(ctx context.Context, o options) error {
	binary := o.binary
	if binary == "" {
		var err error
		if binary, err = APIServerBinary(); err != nil {
			return err
		}
	}
	var err error
	if c.pki, err = newPKI(o.servingIPs); err != nil {
		return err
	}
	pkiDir := filepath.Join(c.dir, "pki")
	if err := os.MkdirAll(pkiDir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", pkiDir, err)
	}
	files, err := c.pki.write(pkiDir)
	if err != nil {
		return err
	}
	c.files = files
	if err := c.users.issueTokens(); err != nil {
		return err
	}
	tokenFile, err := c.users.write(pkiDir)
	if err != nil {
		return err
	}

	if c.etcd, err = startEtcd(ctx, c.dir); err != nil {
		return err
	}

	cfg := apiServerConfig{
		binary:     binary,
		dir:        c.dir,
		etcdURL:    c.etcd.url,
		files:      files,
		tokenFile:  tokenFile,
		extraFlags: o.extraFlags,
	}
	c.apiserverCfg = cfg
	admin, _ := c.users.lookup(AdminUser)
	// A port taken between choosing it and the process binding it makes
	// the process exit at once; try again on another.
	for attempt := 1; ; attempt++ {
		if c.apiserver, err = startAPIServer(cfg); err != nil {
			return err
		}
		err = c.apiserver.waitReady(ctx, c.pki.servingCA.certPEM, admin.token)
		if err == nil {
			break
		}
		if attempt == 3 || !c.apiserver.portInUse() {
			return err
		}
		_ = c.apiserver.stop() // reaped already; closes its log
	}
	c.host = fmt.Sprintf("https://127.0.0.1:%d", c.apiserver.port)

	if c.clientset, err = kubernetes.NewForConfig(c.AdminConfig()); err != nil {
		return fmt.Errorf("admin clientset: %w", err)
	}
	if c.dynamic, err = dynamic.NewForConfig(c.AdminConfig()); err != nil {
		return fmt.Errorf("admin dynamic client: %w", err)
	}
	if c.kubeconfig, err = c.writeKubeconfig(AdminUser); err != nil {
		return err
	}
	return c.waitBootstrapped(ctx)
}

// Stop stops the kube-apiserver (SIGTERM, then SIGKILL) and etcd. It is
// safe to call more than once; later calls return the first result. It
// leaves the cluster's directory in place.
func (c *Cluster) Stop() error {
	c.stopOnce.Do(func() {
		c.procMu.Lock()
		defer c.procMu.Unlock()
		c.stopped = true
		var errs []error
		if c.apiserver != nil {
			errs = append(errs, c.apiserver.stop())
		}
		if c.etcd != nil {
			c.etcd.stop()
		}
		c.stopErr = errors.Join(errs...)
	})
	return c.stopErr
}

// apiServerPID is the kube-apiserver's pid; 0 while it is not running.
func (c *Cluster) apiServerPID() int {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	if c.apiserver == nil || c.apiserver.cmd.Process == nil {
		return 0
	}
	return c.apiserver.cmd.Process.Pid
}

// Host is the kube-apiserver's URL, https://127.0.0.1:<port>.
func (c *Cluster) Host() string { return c.host }

// Dir is the directory holding the cluster's certificates, kubeconfig,
// etcd data and logs.
func (c *Cluster) Dir() string { return c.dir }

// EtcdURL is the embedded etcd's client URL.
func (c *Cluster) EtcdURL() string { return c.etcd.url }

// StartupDuration is how long StartContext took, binary lookup included.
func (c *Cluster) StartupDuration() time.Duration { return c.startup }

// CAData is the PEM certificate of the CA that signed the kube-apiserver's
// serving certificate.
func (c *Cluster) CAData() []byte { return clonePEM(c.pki.servingCA.certPEM) }

// FrontProxyCAData is the PEM certificate of the CA that signed the
// aggregator's front-proxy client certificate; aggregated servers find the
// same bytes in the extension-apiserver-authentication ConfigMap.
func (c *Cluster) FrontProxyCAData() []byte { return clonePEM(c.pki.frontProxy.certPEM) }

// APIServerLogPath is the file the kube-apiserver's output goes to.
func (c *Cluster) APIServerLogPath() string { return filepath.Join(c.dir, "kube-apiserver.log") }

// logTailLines is how much of each log a failure shows: enough for the
// error and its context, not a flood.
const logTailLines = 60

// LogTail returns the last lines of the kube-apiserver's and etcd's logs.
func (c *Cluster) LogTail() string {
	var b strings.Builder
	for _, l := range []struct{ name, path string }{
		{"kube-apiserver", c.APIServerLogPath()},
		{"etcd", filepath.Join(c.dir, "etcd.log")},
	} {
		data, err := os.ReadFile(l.path)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > logTailLines {
			lines = lines[len(lines)-logTailLines:]
		}
		fmt.Fprintf(&b, "--- last %d lines of %s (%s)\n%s\n", len(lines), l.name, l.path, strings.Join(lines, "\n"))
	}
	return b.String()
}

func clonePEM(b []byte) []byte { return append([]byte(nil), b...) }
