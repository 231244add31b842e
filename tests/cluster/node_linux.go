package cluster

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// kubeletConfig is the node's KubeletConfiguration. The settings that are
// not defaults are what these machines need (real-node notes): cgroup v1
// without systemd, swap allowed, and every path under the node's
// directory; the cgroup root is a subtree of the test's own, removed at
// stop. The kubelet serves on the node address only inside the cluster's
// network namespace, without authentication (nothing outside can reach it).
// maxPods fills the pod CIDR (a /24): a warm pool of 100 Pods refilling
// behind 100 claimed ones must fit.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous:
    enabled: true
  webhook:
    enabled: false
authorization:
  mode: AlwaysAllow
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
cgroupRoot: %[2]s
containerRuntimeEndpoint: unix://%[3]s
podLogsDir: %[4]s
resolvConf: ""
clusterDomain: cluster.local
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1%%"
  nodefs.available: "1%%"
  imagefs.available: "1%%"
localStorageCapacityIsolation: false
serializeImagePulls: false
protectKernelDefaults: false
maxPods: 250
`

// kubeProxyConfig runs kube-proxy's iptables mode in the cluster's network
// namespace. masqueradeAll: without br_netfilter, a pod reaching a Service
// backed by a pod on the same bridge would get the reply straight from the
// backend's address; masquerading sends it back through the node. The
// conntrack settings are zero so kube-proxy leaves the machine-wide
// conntrack sysctls alone.
const kubeProxyConfig = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: %[1]s
hostnameOverride: %[2]s
mode: iptables
clusterCIDR: %[3]s
bindAddress: 0.0.0.0
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  masqueradeAll: true
`

// killNamespaceProcesses SIGKILLs every process of the cgroup subtree (the
// containers) and, with wholeNamespace, every process of this process's
// network namespace other than this process and its ancestors: containerd's
// shims (which outlive containerd by design) and anything else the cluster
// started. The last call, after the graceful stops, leaves nothing of the
// cluster running.
func killNamespaceProcesses(cgroupDirs []string, wholeNamespace bool) {
	self := os.Getpid()
	victims := map[int]bool{}
	for _, top := range cgroupDirs {
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, err := os.ReadFile(p)
			if err != nil {
				return nil
			}
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					victims[pid] = true
				}
			}
			return nil
		})
	}
	if ns, err := os.Readlink("/proc/self/ns/net"); err == nil && wholeNamespace {
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if other, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns/net")); err == nil && other == ns {
				victims[pid] = true
			}
		}
	}
	// Never this process nor its ancestors (unshare, the test runner).
	for pid := self; pid > 1; pid = parentPID(pid) {
		delete(victims, pid)
	}
	for pid := range victims {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// Give the kernel a moment to reap them so their cgroups empty.
	deadline := time.Now().Add(5 * time.Second)
	for pid := range victims {
		for time.Now().Before(deadline) {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err != nil {
				break
			}
			if st, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil && isZombie(st) {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func parentPID(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	// pid (comm) state ppid ...; comm may hold spaces, so cut at the last ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

func isZombie(stat []byte) bool {
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && strings.HasPrefix(strings.TrimSpace(s[i+1:]), "Z")
}

// unmountUnder detaches every mount at or below dir (the kubelet's volume
// tmpfs, containerd's overlay root filesystems and namespace pins),
// deepest first, so the directory can be removed. The mounts live only in
// the cluster's private mount namespace; this is for the directory's sake.
func unmountUnder(dir string) error {
	all, err := mountPoints()
	if err != nil {
		return err
	}
	var points []string
	for _, p := range all {
		if p == dir || strings.HasPrefix(p, dir+"/") {
			points = append(points, p)
		}
	}
	slices.SortFunc(points, func(a, b string) int { return len(b) - len(a) })
	var firstErr error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && firstErr == nil {
			firstErr = fmt.Errorf("unmount %s: %w", p, err)
		}
	}
	return firstErr
}

// mountPoints lists this mount namespace's mount points, from
// /proc/self/mountinfo.
func mountPoints() ([]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 5 {
			points = append(points, unescapeMountPath(fields[4]))
		}
	}
	return points, sc.Err()
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if n, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(n))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
