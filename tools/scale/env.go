package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/apiserverenv"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tools/scale/procstat"
	"github.com/cocoonstack/sandbox-operator/tools/scale/writecount"
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
	pollEvery      = 100 * time.Millisecond
	clientQPS      = 10000
	clientBurst    = 10000
	requestTimeout = 5 * time.Minute
)

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
	if b.server, err = apiserverenv.Binary(); err != nil {
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
	fleet   *simfleet.Fleet
	server  *apiserverenv.Server

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
	e.kubeAPIServerPID = procstat.FindChild(os.Getpid(), "kube-apiserver")
	if err := e.cluster.InstallCRDs(ctx, crds.NodeInventoryYAML); err != nil {
		return nil, err
	}
	direct := e.cluster.AdminConfig()
	direct.QPS, direct.Burst = clientQPS, clientBurst
	direct.Timeout = requestTimeout
	if e.direct, err = dynamic.NewForConfig(direct); err != nil {
		return nil, err
	}
	e.sandboxes = e.direct.Resource(apiserverenv.SandboxGVR)
	e.restRaw = e.cluster.Clientset().Discovery().RESTClient()

	tokenFile, token, err := apiserverenv.WriteSandboxdToken(dir)
	if err != nil {
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

	e2bAddr, err := freeLoopbackAddr()
	if err != nil {
		return nil, err
	}
	e.e2bURL = "http://" + e2bAddr
	if e.server, err = apiserverenv.Start(ctx, e.cluster, apiserverenv.Options{
		Binary:              opts.binaries.server,
		Dir:                 dir,
		SandboxdTokenFile:   tokenFile,
		InventoryStaleAfter: staleAfter,
		ExtraArgs: []string{
			// The list phase also asks for CBOR.
			"--feature-gates=CBORServingAndStorage=true",
			"--enable-e2b-api",
			"--e2b-bind-address=" + e2bAddr,
			"--e2b-api-key-file=" + keyFile,
			"--e2b-namespace=" + e2bNamespace,
			"--e2b-domain=scale.invalid",
			"--e2b-envd-secret-file=" + envdSecretFile,
			// The burst is the measurement: no per-key rate or cap.
			"--e2b-create-rate=0",
			"--e2b-max-sandboxes=0",
		},
	}); err != nil {
		return nil, err
	}
	if err := e.server.WaitReady(ctx); err != nil {
		return nil, err
	}
	if err := e.server.WaitHTTPOK(ctx, nil, e.e2bURL+"/health"); err != nil {
		return nil, fmt.Errorf("e2b surface not healthy: %w", err)
	}
	// Both lanes' pools, on every node.
	if err := apiserverenv.WaitFleetPublished(ctx, e.cluster.Dynamic(), e.fleet, 2); err != nil {
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
func startFleet(client dynamic.Interface, opts envOptions, token string, envdSecret []byte) (*simfleet.Fleet, error) {
	f, err := simfleet.Start(context.Background(), simfleet.Config{
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
		Envd:             &simfleet.EnvdConfig{Secret: envdSecret},
		Publish:          &simfleet.PublishConfig{Client: client, Interval: publishInterval},
	})
	if err != nil {
		return nil, fmt.Errorf("start fleet: %w", err)
	}
	return f, nil
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
func (e *Env) serverUsage() (procstat.Usage, error) {
	if err := e.server.ExitErr(); err != nil {
		return procstat.Usage{}, err
	}
	return procstat.Read(e.server.Pid())
}

// writeCounts snapshots the kube-apiserver's and etcd's write counters.
// It scrapes as the admin, straight to the kube-apiserver, so the scrape
// never passes through the byte counter.
func (e *Env) writeCounts(ctx context.Context) (writecount.Snapshot, error) {
	return writecount.Read(ctx, e.restRaw, e.cluster.EtcdURL())
}

// kubeAPIServerCPU reads the kube-apiserver's CPU seconds, 0 when its pid
// is unknown.
func (e *Env) kubeAPIServerCPU() float64 {
	if e.kubeAPIServerPID == 0 {
		return 0
	}
	v, err := procstat.CPUSeconds(e.kubeAPIServerPID)
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
	return e.server.ExitErr()
}

// saveLogs copies the servers' logs into dir.
func (e *Env) saveLogs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	var errs []error
	for _, src := range []string{
		e.server.LogPath(),
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
	errs = append(errs, apiserverenv.Teardown(e.server, e.fleet, e.cluster))
	if removeDir {
		errs = append(errs, os.RemoveAll(e.dir))
	}
	return errors.Join(errs...)
}

// logTail is the end of the sandbox-apiserver's, kube-apiserver's and
// etcd's logs.
func (e *Env) logTail() string {
	return apiserverenv.LogTails(e.server, serverLogTailLines, e.cluster)
}

// serverLogTailLines is how much of the server's log a failed start or a
// dead server shows.
const serverLogTailLines = 60

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
