package cluster

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// NodeName is the node cluster's only node.
const NodeName = "sandbox-node"

// NodeImage is an image the node gets before any pod starts: an OCI layout
// tar from //images, imported into containerd as Name:<the layout's tag>.
type NodeImage struct {
	Tar  string
	Name string // repository, e.g. ghcr.io/cocoonstack/sandbox-apiserver
}

// NodeOptions configures StartNodeCluster.
type NodeOptions struct {
	// SandboxImage is the pods' infrastructure (pause) image; containerd is
	// told to use it, so nothing is pulled for it.
	SandboxImage NodeImage
	// Images are imported before the kubelet starts.
	Images []NodeImage
	// Cluster options for the control plane (e.g. a start timeout).
	ClusterOptions []Option
	// Timeout bounds the whole start; default 5 minutes.
	Timeout time.Duration
}

// NodeCluster is a real single-node Kubernetes cluster: the Cluster's
// etcd and kube-apiserver plus kube-controller-manager, kube-scheduler, a
// kubelet on containerd and runc with bridge networking, and kube-proxy.
// It runs inside the namespaces RunIsolated made, so the process must have
// been started through it.
type NodeCluster struct {
	*Cluster
	dir               string
	host              *hostChanges
	runtime           *containerd
	controllerManager *testbin.Process
	scheduler         *testbin.Process
	kubelet           *testbin.Process
	kubeProxy         *testbin.Process
	timings           NodeTimings
}

// NodeTimings are the measured durations of a start.
type NodeTimings struct {
	ControlPlane time.Duration // etcd and kube-apiserver ready
	Images       time.Duration // images imported into containerd
	NodeReady    time.Duration // from the start until the Node is Ready
}

// StartNode starts a node cluster for t with its files under t.TempDir(),
// failing the test if it cannot and stopping it at cleanup (logging the
// components' log tails first if the test failed).
func StartNode(t testing.TB, o NodeOptions) *NodeCluster {
	t.Helper()
	if ok, why := Isolated(); !ok {
		if os.Getenv("TEST_SRCDIR") != "" || os.Getenv("CI") != "" {
			t.Fatalf("node cluster unavailable: %s", why)
		}
		t.Skipf("node cluster unavailable: %s", why)
	}
	n, err := StartNodeCluster(context.Background(), t.TempDir(), o)
	if err != nil {
		t.Fatalf("start node cluster: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(n.LogTail())
		}
		if err := n.Stop(); err != nil {
			t.Errorf("stop node cluster: %v", err)
		}
	})
	return n
}

// StartNodeCluster starts a node cluster under dir. The caller stops it
// with Stop. On error everything started is stopped and the error carries
// the components' log tails.
func StartNodeCluster(ctx context.Context, dir string, o NodeOptions) (*NodeCluster, error) {
	if ok, why := Isolated(); !ok {
		return nil, errors.New(why)
	}
	if o.Timeout == 0 {
		o.Timeout = 5 * time.Minute
	}
	ctx, cancel := context.WithTimeoutCause(ctx, o.Timeout, fmt.Errorf("node cluster start-up exceeded %v", o.Timeout))
	defer cancel()
	n := &NodeCluster{dir: dir}
	if err := n.start(ctx, o); err != nil {
		tail := n.LogTail()
		return nil, errors.Join(fmt.Errorf("%w\n%s", err, tail), n.Stop())
	}
	return n, nil
}

func (n *NodeCluster) start(ctx context.Context, o NodeOptions) error {
	began := time.Now()
	binaries := map[string]string{}
	for env, name := range map[string]string{
		KubeletEnv:               "kubelet",
		KubeControllerManagerEnv: "kube-controller-manager",
		KubeSchedulerEnv:         "kube-scheduler",
		KubeProxyEnv:             "kube-proxy",
	} {
		p, err := kubeBinary(env, name)
		if err != nil {
			return err
		}
		binaries[name] = p
	}

	var err error
	if n.host, err = prepareHost(fmt.Sprintf("/sandbox-operator-node-%d", os.Getpid())); err != nil {
		return err
	}

	opts := append([]Option{
		WithServingIPs(net.ParseIP(NodeIP), net.ParseIP("10.96.0.1")),
		WithAPIServerFlags(
			// Pods reach the apiserver through the kubernetes Service, whose
			// endpoint is the advertised node address.
			"--bind-address=0.0.0.0",
			"--advertise-address="+NodeIP,
			"--service-cluster-ip-range="+NodeServiceCIDR,
			"--endpoint-reconciler-type=lease",
			"--allow-privileged=true",
		),
	}, o.ClusterOptions...)
	if n.Cluster, err = StartContext(ctx, filepath.Join(n.dir, "control-plane"), opts...); err != nil {
		return err
	}
	n.Cluster.nodeIP = NodeIP
	n.timings.ControlPlane = time.Since(began)

	caFile := filepath.Join(n.Cluster.dir, "pki", "serving-ca.crt")
	if err := os.WriteFile(caFile, n.CAData(), 0o644); err != nil {
		return fmt.Errorf("write serving CA: %w", err)
	}
	kubeconfig := n.Kubeconfig()
	logs := filepath.Join(n.dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return err
	}

	if n.controllerManager, err = testbin.StartProcess("kube-controller-manager", binaries["kube-controller-manager"],
		filepath.Join(logs, "kube-controller-manager.log"), []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--leader-elect=false",
			"--service-account-private-key-file=" + n.files.saKey,
			"--root-ca-file=" + caFile,
			"--use-service-account-credentials=false",
			"--cluster-name=sandbox-operator-local",
		}, nil); err != nil {
		return err
	}
	if n.scheduler, err = testbin.StartProcess("kube-scheduler", binaries["kube-scheduler"],
		filepath.Join(logs, "kube-scheduler.log"), []string{
			"--kubeconfig=" + kubeconfig,
			"--authentication-kubeconfig=" + kubeconfig,
			"--authorization-kubeconfig=" + kubeconfig,
			"--bind-address=127.0.0.1",
			"--leader-elect=false",
		}, nil); err != nil {
		return err
	}

	sandboxRef, err := ImageRef(o.SandboxImage)
	if err != nil {
		return err
	}
	if n.runtime, err = startContainerd(ctx, filepath.Join(n.dir, "containerd"), sandboxRef); err != nil {
		return err
	}
	importBegan := time.Now()
	for _, img := range append([]NodeImage{o.SandboxImage}, o.Images...) {
		if err := n.runtime.importImage(ctx, img.Tar, img.Name); err != nil {
			return fmt.Errorf("import %s: %w", img.Name, err)
		}
	}
	n.timings.Images = time.Since(importBegan)

	kubeletDir := filepath.Join(n.dir, "kubelet")
	podLogs := filepath.Join(n.dir, "pod-logs")
	for _, d := range []string{kubeletDir, podLogs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	kubeletConf := filepath.Join(n.dir, "kubelet.yaml")
	if err := os.WriteFile(kubeletConf, fmt.Appendf(nil, kubeletConfig, NodeIP, n.host.cgroupRoot, n.runtime.socket, podLogs), 0o600); err != nil {
		return err
	}
	if n.kubelet, err = testbin.StartProcess("kubelet", binaries["kubelet"], filepath.Join(logs, "kubelet.log"), []string{
		"--config=" + kubeletConf,
		"--kubeconfig=" + kubeconfig,
		"--root-dir=" + kubeletDir,
		"--cert-dir=" + filepath.Join(kubeletDir, "pki"),
		"--hostname-override=" + NodeName,
		"--node-ip=" + NodeIP,
	}, []string{"PATH=" + nodePath}); err != nil {
		return err
	}
	proxyConf := filepath.Join(n.dir, "kube-proxy.yaml")
	if err := os.WriteFile(proxyConf, fmt.Appendf(nil, kubeProxyConfig, kubeconfig, NodeName, PodCIDR), 0o600); err != nil {
		return err
	}
	if n.kubeProxy, err = testbin.StartProcess("kube-proxy", binaries["kube-proxy"], filepath.Join(logs, "kube-proxy.log"),
		[]string{"--config=" + proxyConf}, []string{"PATH=" + nodePath}); err != nil {
		return err
	}
	if err := n.waitNodeReady(ctx); err != nil {
		return err
	}
	n.timings.NodeReady = time.Since(began)
	return nil
}

// waitNodeReady waits for the node to register and report Ready (which
// needs the runtime and its CNI network ready) and for the default
// ServiceAccount, which pods need, to exist.
func (n *NodeCluster) waitNodeReady(ctx context.Context) error {
	cs := n.Clientset()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		for _, p := range n.processes() {
			if err := p.ExitErr(); err != nil {
				return err
			}
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, NodeName, metav1.GetOptions{})
		if err == nil && nodeReady(node) {
			if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err == nil {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for node %s to be Ready: %w", NodeName, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func (n *NodeCluster) processes() []*testbin.Process {
	var ps []*testbin.Process
	for _, p := range []*testbin.Process{n.kubeProxy, n.kubelet, n.scheduler, n.controllerManager} {
		if p != nil {
			ps = append(ps, p)
		}
	}
	if n.runtime != nil && n.runtime.process != nil {
		ps = append(ps, n.runtime.process)
	}
	return ps
}

// ComponentPIDs are the pids of the cluster's own processes by name
// (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
// kube-proxy, containerd), for measuring what each spends. etcd runs
// inside the calling process and is not among them.
func (n *NodeCluster) ComponentPIDs() map[string]int {
	out := map[string]int{}
	named := map[string]*testbin.Process{
		"kube-controller-manager": n.controllerManager, "kube-scheduler": n.scheduler,
		"kubelet": n.kubelet, "kube-proxy": n.kubeProxy,
	}
	if n.runtime != nil {
		named["containerd"] = n.runtime.process
	}
	for name, p := range named {
		if p != nil {
			out[name] = p.Pid()
		}
	}
	if pid := n.apiServerPID(); pid > 0 {
		out["kube-apiserver"] = pid
	}
	return out
}

// Timings reports how long the start's phases took.
func (n *NodeCluster) Timings() NodeTimings { return n.timings }

// Stop stops the node and the control plane and undoes every change
// outside the cluster's directory and namespaces: pods and shims are
// killed, mounts under the directory detached, the kubelet's cgroups
// removed and its sysctls restored.
func (n *NodeCluster) Stop() error {
	var errs []error
	for _, p := range []*testbin.Process{n.kubeProxy, n.kubelet, n.scheduler, n.controllerManager} {
		if p != nil {
			_ = p.Stop(10 * time.Second) // an early exit was reported while running
		}
	}
	if n.host != nil {
		killNamespaceProcesses(n.host.cgroupDirs, false) // containers, before their runtime goes
	}
	if err := n.runtime.stop(); err != nil {
		errs = append(errs, err)
	}
	if n.Cluster != nil {
		errs = append(errs, n.Cluster.Stop())
	}
	if n.host != nil {
		killNamespaceProcesses(n.host.cgroupDirs, true) // shims and strays
	}
	if err := unmountUnder(n.dir); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, n.host.restore())
	return errors.Join(errs...)
}

// LogTail returns the last lines of every component's log.
func (n *NodeCluster) LogTail() string {
	var b strings.Builder
	if n.Cluster != nil {
		b.WriteString(n.Cluster.LogTail())
	}
	for _, p := range n.processes() {
		b.WriteString(p.LogTail(logTailLines))
	}
	return b.String()
}

// PodLogs returns the container logs of the pods in namespace whose name
// starts with prefix, read from the kubelet's log directory (the test
// cluster gives the apiserver no kubelet client credentials, so kubectl
// logs is not the way).
func (n *NodeCluster) PodLogs(namespace, prefix string, lines int) string {
	var b strings.Builder
	dirs, _ := filepath.Glob(filepath.Join(n.dir, "pod-logs", namespace+"_"+prefix+"*"))
	for _, d := range dirs {
		files, _ := filepath.Glob(filepath.Join(d, "*", "*.log"))
		for _, f := range files {
			data, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
			if len(all) > lines {
				all = all[len(all)-lines:]
			}
			fmt.Fprintf(&b, "--- %s\n%s\n", strings.TrimPrefix(f, n.dir+"/"), strings.Join(all, "\n"))
		}
	}
	return b.String()
}

// Kubectl runs kubectl (from the build) against the cluster as admin and
// returns its combined output.
func (n *NodeCluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	bin, err := KubectlBinary()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", n.Kubeconfig()}, args...)...)
	cmd.Env = childEnv()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// ImageRef is the name an image gets on import: its repository and the
// tag the layout's index carries.
func ImageRef(img NodeImage) (string, error) {
	tag, err := layoutTag(img.Tar)
	if err != nil {
		return "", err
	}
	return img.Name + ":" + tag, nil
}

// layoutTag reads the org.opencontainers.image.ref.name of the single
// entry of an OCI layout tar's index.json.
func layoutTag(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("image layout: %w", err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return "", fmt.Errorf("image layout %s: no index.json", path)
		}
		if err != nil {
			return "", fmt.Errorf("image layout %s: %w", path, err)
		}
		if strings.TrimPrefix(h.Name, "./") != "index.json" {
			continue
		}
		var index struct {
			Manifests []struct {
				Annotations map[string]string `json:"annotations"`
			} `json:"manifests"`
		}
		if err := json.NewDecoder(tr).Decode(&index); err != nil {
			return "", fmt.Errorf("image layout %s: index.json: %w", path, err)
		}
		if len(index.Manifests) != 1 || index.Manifests[0].Annotations["org.opencontainers.image.ref.name"] == "" {
			return "", fmt.Errorf("image layout %s: want one tagged index entry", path)
		}
		return index.Manifests[0].Annotations["org.opencontainers.image.ref.name"], nil
	}
}
