package install

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// What the install names: the release, its namespace, the e2b domain and
// the namespace the e2b key's sandboxes live in.
const (
	Release      = "sandbox-operator"
	Namespace    = "sandbox-system"
	Domain       = "sandbox.local.test"
	E2BNamespace = "default"
	// OtherNamespace is the namespace of a second e2b key, whose caller
	// must not see the first key's sandboxes.
	OtherNamespace = "e2b-other"
	// SimNodes is how many simulated sandboxd nodes run.
	SimNodes = 2

	rolloutTimeout = 4 * time.Minute
)

// Stack is the installed system: the node cluster, the simulated sandboxd
// nodes and the helm release.
type Stack struct {
	Node   *cluster.NodeCluster
	Sim    *testbin.Process
	APIKey string // the e2b API key the install accepts
	// OtherAPIKey is a key of OtherNamespace.
	OtherAPIKey string

	// Timings of Up.
	ClusterUp, InstallToReady time.Duration

	artifacts Artifacts
	dir       string
	helmArgs  []string
	charts    *chartRegistry
}

// Up starts a node cluster under dir (see cluster.StartNodeCluster; the
// process must run under cluster.RunIsolated) and installs the system on
// it, returning once both Deployments have rolled out and the APIService
// is Available. logf reports progress. On error everything is stopped.
func Up(ctx context.Context, dir string, a Artifacts, logf func(format string, args ...any)) (*Stack, error) {
	s := &Stack{artifacts: a, dir: dir}
	began := time.Now()
	logf("starting the cluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy")
	node, err := cluster.StartNodeCluster(ctx, filepath.Join(dir, "cluster"), cluster.NodeOptions{
		SandboxImage: cluster.NodeImage{Tar: a.PauseImage, Name: "ghcr.io/cocoonstack/pause"},
		Images: []cluster.NodeImage{
			{Tar: a.APIServerImage, Name: "ghcr.io/cocoonstack/sandbox-apiserver"},
			{Tar: a.ProxyImage, Name: "ghcr.io/cocoonstack/sandbox-envd-proxy"},
		},
	})
	if err != nil {
		return nil, err
	}
	s.Node = node
	s.ClusterUp = time.Since(began)
	logf("cluster up in %v", s.ClusterUp.Round(time.Millisecond))
	if err := s.install(ctx, logf); err != nil {
		return nil, errors.Join(err, s.Down())
	}
	return s, nil
}

func (s *Stack) install(ctx context.Context, logf func(string, ...any)) error {
	a := s.artifacts
	// The two upstream CRDs. Server-side apply: their schemas are larger
	// than the 256 KiB last-applied annotation a client-side apply writes
	// ("metadata.annotations: Too long").
	for _, crd := range a.CRDs {
		if _, err := s.Kubectl(ctx, "apply", "--server-side", "-f", crd); err != nil {
			return err
		}
	}
	if _, err := s.Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=60s",
		"crd/sandboxtemplates.extensions.agents.x-k8s.io", "crd/sandboxwarmpools.extensions.agents.x-k8s.io"); err != nil {
		return err
	}

	secrets := filepath.Join(s.dir, "secrets")
	if err := os.MkdirAll(secrets, 0o700); err != nil {
		return err
	}
	token, envdSecret, key, other := randomHex(), randomHex(), "e2b_"+randomHex(), "e2b_"+randomHex()
	s.APIKey, s.OtherAPIKey = key, other
	write := func(name, content string) (string, error) {
		p := filepath.Join(secrets, name)
		return p, os.WriteFile(p, []byte(content), 0o600)
	}
	tokenFile, err := write("sandboxd-token", token+"\n")
	if err != nil {
		return err
	}
	secretFile, err := write("envd-secret", envdSecret+"\n")
	if err != nil {
		return err
	}
	keysFile, err := write("e2b-keys", fmt.Sprintf("%s %s\n%s %s\n", key, E2BNamespace, other, OtherNamespace))
	if err != nil {
		return err
	}

	// The simulated sandboxd nodes: host processes on the node's address,
	// which pods reach through the bridge, publishing NodeInventory.
	logf("starting %d simulated sandboxd nodes on %s", SimNodes, cluster.NodeIP)
	if s.Sim, err = testbin.StartProcess("sandboxd-sim", a.Sim, filepath.Join(s.dir, "sandboxd-sim.log"), []string{
		fmt.Sprintf("--nodes=%d", SimNodes),
		"--listen-host=" + cluster.NodeIP,
		"--api-token-file=" + tokenFile,
		"--envd-secret-file=" + secretFile,
		"--egress-attachment",
		"--echo-ports=",
		"--kubeconfig=" + s.Node.Kubeconfig(),
		"--publish-interval=2s",
		"--scratch-dir=" + filepath.Join(s.dir, "scratch"),
	}, nil); err != nil {
		return err
	}

	// The Secrets the values name, and (cert-manager off) the serving
	// certificate with its CA as the APIService's caBundle.
	steps := [][]string{
		{"create", "namespace", Namespace},
		{"-n", Namespace, "create", "secret", "generic", "sandboxd-token", "--from-file=token=" + tokenFile},
		{"-n", Namespace, "create", "secret", "generic", "e2b-envd-secret", "--from-file=secret=" + secretFile},
		{"-n", Namespace, "create", "secret", "generic", "e2b-api-keys", "--from-file=keys=" + keysFile},
	}
	for _, st := range steps {
		if _, err := s.Kubectl(ctx, st...); err != nil {
			return err
		}
	}
	if err := s.createBuildStore(ctx); err != nil {
		return err
	}
	certs, err := cluster.NewServingCerts(secrets, "sandbox-apiserver."+Namespace+".svc")
	if err != nil {
		return err
	}
	// With the CA beside the pair, as cert-manager writes it: the
	// ServiceMonitor verifies the apiserver's certificate with it.
	caFile, err := write("serving-ca.crt", string(certs.CAPEM))
	if err != nil {
		return err
	}
	if _, err := s.Kubectl(ctx, "-n", Namespace, "create", "secret", "generic", "sandbox-apiserver-serving-certs",
		"--type=kubernetes.io/tls", "--from-file=tls.crt="+certs.CertFile, "--from-file=tls.key="+certs.KeyFile, "--from-file=ca.crt="+caFile); err != nil {
		return err
	}
	if err := s.installMonitoringStack(ctx); err != nil {
		return err
	}

	// The chart is installed from an OCI registry, as a published one is.
	charts, err := startChartRegistry(ctx, a.Chart)
	if err != nil {
		return err
	}
	s.charts = charts
	began := time.Now()
	logf("helm install %s --version %s", charts.Ref, charts.Version)
	s.helmArgs = []string{
		"upgrade", "--install", Release, charts.Ref, "--version", charts.Version, "--plain-http",
		"--namespace", Namespace,
		"--values", a.E2BValues,
		"--set", "certManager.enabled=false",
		"--set", "certManager.caBundle=" + base64.StdEncoding.EncodeToString(certs.CAPEM),
		"--set", "apiserver.e2b.domain=" + Domain,
		"--set", "envdProxy.domain=" + Domain,
		// Template builds, on a volume every replica mounts.
		"--set", "apiserver.e2b.builds.enabled=true",
		"--set", "apiserver.e2b.builds.dir.existingClaim=" + BuildClaim,
	}
	s.helmArgs = append(s.helmArgs, monitoringValues...)
	if _, err := s.Helm(ctx, s.helmArgs...); err != nil {
		return err
	}
	if err := s.WaitRollouts(ctx); err != nil {
		return err
	}
	if _, err := s.Kubectl(ctx, "wait", "--for=condition=Available", "--timeout=3m", "apiservice/v1beta1.agents.x-k8s.io"); err != nil {
		return err
	}
	s.InstallToReady = time.Since(began)
	logf("installed and Ready in %v", s.InstallToReady.Round(time.Millisecond))
	return nil
}

// WaitRollouts waits for both Deployments to finish rolling out.
func (s *Stack) WaitRollouts(ctx context.Context) error {
	for _, d := range []string{"deployment/sandbox-apiserver", "deployment/sandbox-envd-proxy"} {
		if _, err := s.Kubectl(ctx, "-n", Namespace, "rollout", "status", d, "--timeout="+rolloutTimeout.String()); err != nil {
			return err
		}
	}
	return nil
}

// Upgrade runs helm upgrade with the install's arguments plus extra.
func (s *Stack) Upgrade(ctx context.Context, extra ...string) error {
	_, err := s.Helm(ctx, append(append([]string{}, s.helmArgs...), extra...)...)
	return err
}

// Kubectl runs the build's kubectl as the cluster's admin.
func (s *Stack) Kubectl(ctx context.Context, args ...string) (string, error) {
	return s.Node.Kubectl(ctx, args...)
}

// Helm runs the build's helm against the cluster, with its caches under
// the stack's directory, and returns its standard output.
func (s *Stack) Helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.artifacts.Helm, append(args, "--kubeconfig", s.Node.Kubeconfig())...)
	home := filepath.Join(s.dir, "helm")
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home+"/cache", "HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("helm %s: %w\n%s%s", args[0], err, out, stderr.String())
	}
	return string(out), nil
}

// ServiceAddr is <ClusterIP>:<port> of a Service in the release
// namespace, reached through kube-proxy's rules as a pod would.
func (s *Stack) ServiceAddr(ctx context.Context, name string) (string, error) {
	svc, err := s.Node.Clientset().CoreV1().Services(Namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if svc.Spec.ClusterIP == "" || svc.Spec.ClusterIP == "None" || len(svc.Spec.Ports) == 0 {
		return "", fmt.Errorf("Service %s has no ClusterIP and port", name)
	}
	return fmt.Sprintf("%s:%d", svc.Spec.ClusterIP, svc.Spec.Ports[0].Port), nil
}

// LogTail is what explains a failure: the cluster's components, the
// simulated nodes, the pods and their logs, and the events.
func (s *Stack) LogTail() string {
	var b strings.Builder
	b.WriteString(s.Node.LogTail())
	if s.Sim != nil {
		b.WriteString(s.Sim.LogTail(40))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, args := range [][]string{{"get", "pods", "-A", "-o", "wide"}, {"get", "events", "-A", "--sort-by=.lastTimestamp"}} {
		out, err := s.Kubectl(ctx, args...)
		if err != nil {
			out = err.Error()
		}
		fmt.Fprintf(&b, "--- kubectl %s\n%s\n", strings.Join(args, " "), out)
	}
	b.WriteString(s.Node.PodLogs(Namespace, "sandbox-apiserver", 60))
	b.WriteString(s.Node.PodLogs(Namespace, "sandbox-envd-proxy", 40))
	return b.String()
}

// Down stops the simulated nodes and the cluster.
func (s *Stack) Down() error {
	var errs []error
	if s.Sim != nil {
		_ = s.Sim.Stop(10 * time.Second)
	}
	if s.Node != nil {
		errs = append(errs, s.Node.Stop())
	}
	if s.charts != nil {
		s.charts.close()
	}
	return errors.Join(errs...)
}

func randomHex() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
