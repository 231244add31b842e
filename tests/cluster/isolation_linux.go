package cluster

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
)

// The node cluster's addresses. Everything lives in a network namespace
// made for the process (see RunIsolated), so these private ranges never
// touch the machine's own network: the node's address sits on the
// namespace's loopback interface (these kernels lack the dummy link type;
// a non-127 address on lo is still reachable from the pod bridge), pods on
// a CNI bridge, and Services are kube-proxy's rules.
const (
	// NodeIP is the node's address: the kubelet's node IP, the address the
	// kube-apiserver advertises to pods, and where host processes (the
	// simulated sandboxd nodes) listen so pods can reach them.
	NodeIP = "10.200.0.1"
	// PodCIDR is the CNI bridge's subnet.
	PodCIDR = "10.244.0.0/24"
	// NodeServiceCIDR is the node cluster's --service-cluster-ip-range; the
	// kubernetes Service takes its first address, 10.96.0.1.
	NodeServiceCIDR = "10.96.0.0/24"

	// isolatedEnv marks the re-run child that already is in the private
	// namespaces.
	isolatedEnv = "SANDBOX_OPERATOR_ISOLATED"
)

// isolationProblem is why RunIsolated could not isolate the process; empty
// once it did (or before it ran).
var isolationProblem = "cluster.RunIsolated was not called (TestMain must call it)"

// RunIsolated runs main inside network and mount namespaces of its own,
// for programs that start a node cluster: the pod bridge, the node address,
// kube-proxy's rules, containerd's mounts and the pods' network namespaces
// all live there and vanish with the process, whatever way it ends, so
// nothing is left on the machine. Call it first thing from TestMain (or a
// command's main) as os.Exit(cluster.RunIsolated(m.Run)).
//
// The process re-runs itself under unshare(1) with the same arguments and
// environment and returns the child's exit code. Where that is impossible
// (not root, no unshare), main runs unisolated and StartNodeCluster
// reports why, so tests can skip with the reason.
func RunIsolated(main func() int) int {
	if InIsolatedChild() {
		if err := EnterIsolated(); err != nil {
			fmt.Fprintf(os.Stderr, "cluster: %v\n", err)
			return 1
		}
		return main()
	}
	// --kill-child: if unshare dies, so does the program; with the
	// parent-death signal, a killed parent takes the whole tree.
	cmd, err := IsolatedCommand(os.Args[1:]...)
	if err != nil {
		isolationProblem = err.Error()
		return main()
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Fprintf(os.Stderr, "cluster: run isolated: %v\n", err)
		return 1
	}
	return 0
}

// setUpNodeNetwork brings up loopback and the node's address in the fresh
// network namespace, and routes the Service range to the node so locally
// sent packets to a ClusterIP reach kube-proxy's DNAT rules (a route must
// exist before netfilter rewrites the destination).
func setUpNodeNetwork() error {
	steps := [][]string{
		{"link", "set", "lo", "up"},
		{"addr", "add", NodeIP + "/32", "dev", "lo"},
		{"route", "add", NodeServiceCIDR, "dev", "lo", "src", NodeIP},
	}
	for _, s := range steps {
		if out, err := exec.Command("ip", s...).CombinedOutput(); err != nil {
			return fmt.Errorf("ip %s: %w: %s", strings.Join(s, " "), err, out)
		}
	}
	// The node routes between the pod bridge and its own address, as a
	// node does (per network namespace; the machine's own is untouched).
	if err := os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("enable forwarding: %w", err)
	}
	// libcni keeps its result cache in /var/lib/cni; a tmpfs there keeps it
	// inside this mount namespace.
	if err := os.MkdirAll("/var/lib/cni", 0o755); err != nil {
		return err
	}
	if err := syscall.Mount("tmpfs", "/var/lib/cni", "tmpfs", 0, "mode=0755"); err != nil {
		return fmt.Errorf("mount tmpfs on /var/lib/cni: %w", err)
	}
	return nil
}

// Isolated reports whether RunIsolated put this process in its own
// namespaces, and if not, why.
func Isolated() (bool, string) { return isolationProblem == "", isolationProblem }
