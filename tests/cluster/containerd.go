package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// criNamespace is the containerd namespace the CRI plugin (and so the
// kubelet) uses; images must be imported there to be seen by pods.
const criNamespace = "k8s.io"

// containerd is the node's container runtime: Debian's containerd and runc
// (from the build's root, see tools/bazel), with every path of its own
// under the node's directory so it runs beside anything else on the machine.
type containerd struct {
	dir     string
	socket  string
	process *testbin.Process
}

// containerdConfig is containerd 2.x's configuration (version 3) for the
// node. restrict_oom_score_adj: these machines lack CAP_SYS_RESOURCE, so
// runc cannot apply the kubelet's negative OOM scores and every pod sandbox
// fails ("can't get final child's PID from pipe") unless the scores are
// clamped, as rootless setups do. netns_mounts_under_state_dir keeps the
// pods' network-namespace pins under the state directory.
const containerdConfig = `version = 3
root = %[1]q
state = %[2]q
disabled_plugins = ["io.containerd.nri.v1.nri", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = %[3]q

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = %[4]q

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_cdi = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = %[5]q
    max_conf_num = 1

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"

[plugins.'io.containerd.internal.v1.opt']
  path = %[6]q
`

// cniConfig is the pod network: a bridge with host-local addresses,
// hairpin on so a pod reaches itself through its own Service.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "sandbox-operator",
  "plugins": [{
    "type": "bridge",
    "bridge": "cni0",
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "ranges": [[{"subnet": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
`

func startContainerd(ctx context.Context, dir, sandboxImage string) (*containerd, error) {
	c := &containerd{dir: dir, socket: filepath.Join(dir, "containerd.sock")}
	confDir := filepath.Join(dir, "cni", "net.d")
	for _, d := range []string{filepath.Join(dir, "root"), filepath.Join(dir, "state"), confDir, filepath.Join(dir, "cni", "ipam")} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("containerd: %w", err)
		}
	}
	cni := fmt.Sprintf(cniConfig, filepath.Join(dir, "cni", "ipam"), PodCIDR)
	if err := os.WriteFile(filepath.Join(confDir, "10-sandbox-operator.conflist"), []byte(cni), 0o600); err != nil {
		return nil, fmt.Errorf("containerd: write CNI config: %w", err)
	}
	config := filepath.Join(dir, "config.toml")
	body := fmt.Sprintf(containerdConfig, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.socket, sandboxImage, confDir, filepath.Join(dir, "opt"))
	if err := os.WriteFile(config, []byte(body), 0o600); err != nil {
		return nil, fmt.Errorf("containerd: write config: %w", err)
	}
	binary, err := exec.LookPath("containerd")
	if err != nil {
		return nil, fmt.Errorf("containerd is not installed (tools/bazel installs it in the build's root): %w", err)
	}
	if c.process, err = testbin.StartProcess("containerd", binary, filepath.Join(dir, "containerd.log"),
		[]string{"--config", config}, []string{"PATH=" + nodePath}); err != nil {
		return nil, err
	}
	if err := waitFor(ctx, c.process, "containerd socket", func() bool {
		return c.ctr(ctx, "version") == nil
	}); err != nil {
		return c, err
	}
	return c, nil
}

// nodePath is the PATH the node's programs run with: containerd finds its
// shim and runc there, the kubelet and kube-proxy their iptables tools.
const nodePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// ctr runs containerd's own client against this containerd.
func (c *containerd) ctr(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", c.socket, "--namespace", criNamespace}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+nodePath)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// ImportImage loads an OCI layout tar (as //images builds them, one image
// index tagged with its version) into the node's image store as
// <name>:<tag>, for this machine's platform only.
func (c *containerd) importImage(ctx context.Context, tar, name string) error {
	return c.ctr(ctx, "images", "import", "--base-name", name, "--local", tar)
}

func (c *containerd) stop() error {
	if c == nil || c.process == nil {
		return nil
	}
	return c.process.Stop(15 * time.Second)
}

// waitFor polls ready until it holds, the process exits or ctx ends.
func waitFor(ctx context.Context, p *testbin.Process, what string, ready func() bool) error {
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready() {
			return nil
		}
		select {
		case <-p.Done():
			return fmt.Errorf("waiting for %s: %w", what, p.ExitErr())
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, context.Cause(ctx))
		case <-tick.C:
		}
	}
}
