package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/apis/sandbox/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/fleet"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// The aggregated API and where the cluster routes it.
const (
	apiGroup       = "agents.x-k8s.io"
	apiVersion     = "v1beta1"
	apiNamespace   = "sandbox-system"
	apiServiceName = "sandbox-apiserver"

	serverBinaryEnv = "SANDBOX_APISERVER"
	serverBinaryPkg = "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver"
)

// Fleet and inventory timing.
const (
	// publishInterval is the simulated nodes' NodeInventory cadence.
	publishInterval = time.Second
	// staleAfter is the server's --inventory-stale-after: a few missed
	// publishes on a loaded machine must not drop a node.
	staleAfter = 10 * time.Second
	// templateBase is the pool template every node keeps warm, on both
	// lanes: "none" for Sandbox creates, "egress" for e2b creates (the
	// SDK's default asks for internet access).
	templateBase = "base"
	netEgress    = "egress"
	// e2bNamespace is where e2b creates land.
	e2bNamespace = "scale-e2b"
)

// Timeouts; the machine may be small and loaded.
const (
	setupTimeout   = 5 * time.Minute
	stopGrace      = 20 * time.Second
	pollEvery      = 100 * time.Millisecond
	clientQPS      = 10000
	clientBurst    = 10000
	requestTimeout = 5 * time.Minute
)

var sandboxGVR = schema.GroupVersionResource{Group: apiGroup, Version: apiVersion, Resource: "sandboxes"}

// envOptions are what the environment is started with.
type envOptions struct {
	nodes int
	// warm is each node's warm target per pool.
	warm int
	// kubectl is needed (the list phase runs it).
	kubectl bool
	// binaries are located before the start-up deadline begins.
	binaries binaries
}

// binaries are the programs the run starts.
type binaries struct {
	server, kubeAPIServer, kubectl string
}

// locateBinaries finds (or builds, outside Bazel) the programs.
func locateBinaries(needKubectl bool) (binaries, error) {
	var b binaries
	var err error
	if b.server, err = testbin.Locate(serverBinaryEnv, serverBinaryPkg, ""); err != nil {
		return b, err
	}
	if b.kubeAPIServer, err = cluster.APIServerBinary(); err != nil {
		return b, err
	}
	if needKubectl {
		if b.kubectl, err = cluster.KubectlBinary(); err != nil {
			return b, err
		}
	}
	return b, nil
}

// Env is the cluster, the simulated fleet, the sandbox-apiserver process
// and the measuring proxy in front of the kube-apiserver.
type Env struct {
	dir  string
	opts envOptions

	cluster *cluster.Cluster
	fleet   *fleet.Fleet
	server  *serverProcess

	// kubeAPIServerPID is the kube-apiserver's pid, 0 if it was not found.
	kubeAPIServerPID int

	// counter is the proxy the measured clients reach the kube-apiserver
	// through; countedKubeconfig and countedConfig point at it.
	counter           *byteCounter
	countedKubeconfig string
	countedConfig     *rest.Config

	// direct is the admin's dynamic client straight to the kube-apiserver
	// (uncounted), with the rate limits lifted.
	direct    dynamic.Interface
	sandboxes dynamic.NamespaceableResourceInterface
	restRaw   rest.Interface

	e2bURL string
	e2bKey string

	startup time.Duration
}

// startEnv starts everything or, on error, stops what it started.
func startEnv(ctx context.Context, opts envOptions) (_ *Env, err error) {
	began := time.Now()
	dir, err := os.MkdirTemp("", "sandbox-scale-")
	if err != nil {
		return nil, fmt.Errorf("temp dir: %w", err)
	}
	e := &Env{dir: dir, opts: opts}
	defer func() {
		if err != nil {
			tail := e.logTail()
			if stopErr := e.Close(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			err = fmt.Errorf("%w\n%s", err, tail)
		}
	}()

	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	if e.cluster, err = cluster.StartContext(ctx, filepath.Join(dir, "cluster"),
		cluster.WithAPIServerBinary(opts.binaries.kubeAPIServer),
		cluster.WithStartTimeout(setupTimeout)); err != nil {
		return nil, err
	}
	e.kubeAPIServerPID = findChild(os.Getpid(), "kube-apiserver")
	if err := e.cluster.InstallCRDs(ctx, crds.NodeInventoryYAML); err != nil {
		return nil, err
	}
	direct := e.cluster.AdminConfig()
	direct.QPS, direct.Burst = clientQPS, clientBurst
	direct.Timeout = requestTimeout
	if e.direct, err = dynamic.NewForConfig(direct); err != nil {
		return nil, err
	}
	e.sandboxes = e.direct.Resource(sandboxGVR)
	e.restRaw = e.cluster.Clientset().Discovery().RESTClient()

	token, err := randomHex(24)
	if err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "sandboxd-token")
	if err := os.WriteFile(tokenFile, []byte(token+"\n"), 0o600); err != nil {
		return nil, err
	}
	envdSecret, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	envdSecretFile := filepath.Join(dir, "envd-secret")
	if err := os.WriteFile(envdSecretFile, []byte(envdSecret+"\n"), 0o600); err != nil {
		return nil, err
	}
	key, err := randomHex(20)
	if err != nil {
		return nil, err
	}
	e.e2bKey = "e2b_" + key
	keyFile := filepath.Join(dir, "e2b-api-keys")
	if err := os.WriteFile(keyFile, []byte(e.e2bKey+" "+e2bNamespace+"\n"), 0o600); err != nil {
		return nil, err
	}

	if e.fleet, err = startFleet(e.cluster.Dynamic(), opts, token, []byte(envdSecret)); err != nil {
		return nil, err
	}

	dnsName := apiServiceName + "." + apiNamespace + ".svc"
	certs, err := cluster.NewServingCerts(dir, dnsName)
	if err != nil {
		return nil, err
	}
	addr, err := e.cluster.RegisterAPIService(ctx, cluster.APIServiceSpec{
		Group: apiGroup, Version: apiVersion,
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
	e2bAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	e.e2bURL = "http://" + e2bAddr
	kubeconfig := e.cluster.Kubeconfig()
	e.server, err = startServer(opts.binaries.server, filepath.Join(dir, "sandbox-apiserver.log"), []string{
		"--bind-address=" + host,
		"--secure-port=" + port,
		"--tls-cert-file=" + certs.CertFile,
		"--tls-private-key-file=" + certs.KeyFile,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--sandboxd-token-file=" + tokenFile,
		"--inventory-stale-after=" + staleAfter.String(),
		// Pools are set on the fleet here; the driver would manage them
		// from SandboxWarmPool objects, whose CRD this cluster lacks.
		"--enable-warm-pool-driver=false",
		"--enable-e2b-api",
		"--e2b-bind-address=" + e2bAddr,
		"--e2b-api-key-file=" + keyFile,
		"--e2b-namespace=" + e2bNamespace,
		"--e2b-domain=scale.invalid",
		"--e2b-envd-secret-file=" + envdSecretFile,
		// The burst is the measurement: no per-key rate or cap.
		"--e2b-create-rate=0",
		"--e2b-max-sandboxes=0",
	})
	if err != nil {
		return nil, err
	}
	if err := e.cluster.WaitAPIServiceAvailable(ctx, cluster.APIServiceName(apiGroup, apiVersion)); err != nil {
		return nil, err
	}
	if err := e.server.waitReady(ctx, addr, dnsName, certs.CAPEM); err != nil {
		return nil, err
	}
	if err := e.waitE2BHealthy(ctx); err != nil {
		return nil, err
	}
	if err := e.waitFleetPublished(ctx); err != nil {
		return nil, err
	}
	if err := e.startCounter(); err != nil {
		return nil, err
	}
	e.startup = time.Since(began)
	return e, nil
}

// startFleet starts opts.nodes simulated nodes, each with a warm pool of
// templateBase on both lanes, publishing every publishInterval.
func startFleet(client dynamic.Interface, opts envOptions, token string, envdSecret []byte) (*fleet.Fleet, error) {
	f, err := fleet.Start(context.Background(), fleet.Config{
		Nodes:     opts.nodes,
		RootToken: token,
		EchoPorts: []int{},
		Pools: []sandboxd.PoolSpec{
			{Template: templateBase, Warm: opts.warm},
			{Template: templateBase, Net: netEgress, Warm: opts.warm},
		},
		// High enough that the burst never meets it.
		MaxClaims:        max(1000, 4*opts.warm*opts.nodes),
		RefillDelay:      0,
		EgressAttachment: true,
		Envd:             &fleet.EnvdConfig{Secret: envdSecret},
		Publish:          &fleet.PublishConfig{Client: client, Interval: publishInterval},
	})
	if err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}
	return f, nil
}

// waitFleetPublished waits until every node's NodeInventory shows its
// pools full.
func (e *Env) waitFleetPublished(ctx context.Context) error {
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
			pools, _ := u.Object["pools"].([]any)
			if len(pools) < 2 {
				last = fmt.Sprintf("%s publishes %d pools", n.Name(), len(pools))
				return false, nil
			}
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

// waitE2BHealthy polls the e2b surface's /health.
func (e *Env) waitE2BHealthy(ctx context.Context) error {
	client := &http.Client{Timeout: 5 * time.Second}
	last := "no answer yet"
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		if err := e.server.exitErr(); err != nil {
			return false, err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.e2bURL+"/health", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err.Error()
			return false, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		last = resp.Status
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		return fmt.Errorf("e2b surface at %s not healthy (%s): %w", e.e2bURL, last, err)
	}
	return nil
}

// startCounter puts the byte-counting proxy in front of the kube-apiserver
// and writes a kubeconfig and a client config that go through it.
func (e *Env) startCounter() error {
	u, err := url.Parse(e.cluster.Host())
	if err != nil {
		return fmt.Errorf("kube-apiserver URL %q: %w", e.cluster.Host(), err)
	}
	if e.counter, err = startByteCounter(u.Host); err != nil {
		return err
	}
	admin := e.cluster.AdminConfig()
	cfg := rest.CopyConfig(admin)
	cfg.Host = "https://" + e.counter.Addr()
	// The proxy passes TLS through, so the client still talks to the
	// kube-apiserver's certificate, which is issued for 127.0.0.1 (IP SAN)
	// and localhost: verify it against the name the client would use
	// without the proxy. Both are 127.0.0.1 here; setting it keeps the
	// proxy transparent should the cluster move.
	cfg.TLSClientConfig.ServerName = u.Hostname()
	cfg.QPS, cfg.Burst = clientQPS, clientBurst
	cfg.Timeout = requestTimeout
	cfg.UserAgent = "sandbox-scale"
	e.countedConfig = cfg

	kc := clientcmdapi.NewConfig()
	kc.Clusters["scale"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: admin.CAData,
		TLSServerName:            u.Hostname(),
	}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{Token: admin.BearerToken}
	kc.Contexts["scale"] = &clientcmdapi.Context{Cluster: "scale", AuthInfo: "admin", Namespace: "default"}
	kc.CurrentContext = "scale"
	e.countedKubeconfig = filepath.Join(e.dir, "counted.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, e.countedKubeconfig); err != nil {
		return fmt.Errorf("write counted kubeconfig: %w", err)
	}
	return nil
}

// serverUsage reads the sandbox-apiserver's CPU time and memory.
func (e *Env) serverUsage() (procUsage, error) {
	if err := e.server.exitErr(); err != nil {
		return procUsage{}, err
	}
	return readUsage(e.server.pid())
}

// kubeAPIServerCPU reads the kube-apiserver's CPU seconds, 0 when its pid
// is unknown.
func (e *Env) kubeAPIServerCPU() float64 {
	if e.kubeAPIServerPID == 0 {
		return 0
	}
	v, err := readCPUSeconds(e.kubeAPIServerPID)
	if err != nil {
		return 0
	}
	return v
}

// claimed is the number of live claims on the fleet.
func (e *Env) claimed() int {
	n := 0
	for _, nd := range e.fleet.Nodes() {
		n += len(nd.Snapshot().Entries)
	}
	return n
}

// waitNoClaims waits until the fleet holds no claims.
func (e *Env) waitNoClaims(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := -1
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(context.Context) (bool, error) {
		last = e.claimed()
		return last == 0, nil
	})
	if err != nil {
		return fmt.Errorf("the fleet still holds %d claims: %w", last, err)
	}
	return nil
}

// checkAlive reports a server that has died.
func (e *Env) checkAlive() error {
	if e.server == nil {
		return errors.New("sandbox-apiserver not started")
	}
	return e.server.exitErr()
}

// saveLogs copies the servers' logs into dir.
func (e *Env) saveLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, src := range []string{
		filepath.Join(e.dir, "sandbox-apiserver.log"),
		filepath.Join(e.dir, "cluster", "kube-apiserver.log"),
		filepath.Join(e.dir, "cluster", "etcd.log"),
	} {
		if _, err := os.Stat(src); err != nil {
			continue
		}
		errs = append(errs, copyFile(filepath.Join(dir, filepath.Base(src)), src))
	}
	return errors.Join(errs...)
}

// Close stops the proxy, the server, the fleet and the cluster, and
// removes the working directory.
func (e *Env) Close() error { return e.close(true) }

// CloseKeepDir is Close but leaves the working directory (logs,
// certificates, kubeconfigs) on disk.
func (e *Env) CloseKeepDir() error { return e.close(false) }

func (e *Env) close(removeDir bool) error {
	var errs []error
	if e.counter != nil {
		errs = append(errs, e.counter.Close())
	}
	if e.server != nil {
		errs = append(errs, e.server.stop())
	}
	if e.fleet != nil {
		errs = append(errs, e.fleet.Close())
	}
	if e.cluster != nil {
		errs = append(errs, e.cluster.Stop())
	}
	if removeDir {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// logTail is the end of the sandbox-apiserver's, kube-apiserver's and
// etcd's logs.
func (e *Env) logTail() string {
	var b strings.Builder
	if e.server != nil {
		b.WriteString(e.server.logTail(60))
	}
	if e.cluster != nil {
		b.WriteString(e.cluster.LogTail())
	}
	return b.String()
}

// serverProcess is the sandbox-apiserver with its output in a log file.
// It is started here rather than with testbin.StartProcess to know its pid.
type serverProcess struct {
	cmd     *exec.Cmd
	logPath string
	exited  chan struct{}
	waitErr error
}

func startServer(binary, logPath string, args []string) (*serverProcess, error) {
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("sandbox-apiserver log: %w", err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), "OPERATOR_LOG_LEVEL=info")
	// The kernel kills it should this process die without cleaning up.
	cmd.SysProcAttr = testbin.ChildSysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start sandbox-apiserver: %w", err)
	}
	p := &serverProcess{cmd: cmd, logPath: logPath, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

func (p *serverProcess) pid() int { return p.cmd.Process.Pid }

// exitErr is nil while the process runs.
func (p *serverProcess) exitErr() error {
	select {
	case <-p.exited:
		return fmt.Errorf("sandbox-apiserver exited: %v", p.waitErr)
	default:
		return nil
	}
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and waits; a server
// that had died before is reported.
func (p *serverProcess) stop() error {
	if err := p.exitErr(); err != nil {
		return fmt.Errorf("before stop: %w", err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// waitReady polls the server's /readyz over TLS, verifying its serving
// certificate as the aggregator does.
func (p *serverProcess) waitReady(ctx context.Context, addr, serverName string, caPEM []byte) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	last := "no answer yet"
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(ctx context.Context) (bool, error) {
		if err := p.exitErr(); err != nil {
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

// logTail returns the last n lines of the log, labelled.
func (p *serverProcess) logTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("--- sandbox-apiserver log unreadable: %v\n", err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last %d lines of sandbox-apiserver (%s)\n%s\n", len(lines), p.logPath, strings.Join(lines, "\n"))
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("random: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// freeLoopbackAddr returns a 127.0.0.1 address whose port was free just
// now.
func freeLoopbackAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("free port: %w", err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr, nil
}

func copyFile(dst, src string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// resolveRunfiles turns the runfiles locations ($(rlocationpath ...)) in
// the named variables into absolute paths, for tests/testbin, which
// resolves them only against RUNFILES_DIR or TEST_SRCDIR: bazel run sets
// neither for a go_binary, whose runfiles tree is <binary>.runfiles (and
// the working directory is <binary>.runfiles/_main).
func resolveRunfiles(envs ...string) error {
	var roots []string
	for _, v := range []string{"RUNFILES_DIR", "TEST_SRCDIR"} {
		if r := os.Getenv(v); r != "" {
			roots = append(roots, r)
		}
	}
	if exe, err := os.Executable(); err == nil {
		roots = append(roots, exe+".runfiles")
	}
	if wd, err := os.Getwd(); err == nil {
		roots = append(roots, filepath.Dir(wd))
	}
	for _, env := range envs {
		p := os.Getenv(env)
		if p == "" || filepath.IsAbs(p) {
			continue
		}
		found := ""
		for _, r := range roots {
			if _, err := os.Stat(filepath.Join(r, p)); err == nil {
				found = filepath.Join(r, p)
				break
			}
		}
		if found == "" {
			return fmt.Errorf("%s=%s is not in the runfiles (looked under %s)", env, p, strings.Join(roots, ", "))
		}
		abs, err := filepath.Abs(found)
		if err != nil {
			return err
		}
		if err := os.Setenv(env, abs); err != nil {
			return err
		}
	}
	return nil
}
