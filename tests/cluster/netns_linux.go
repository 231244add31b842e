package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// IsolatedCommand returns a command that re-runs this program with args
// inside fresh network and mount namespaces, as RunIsolated does, for a
// parent that stays in the machine's namespaces to talk to it (the local
// cluster forwards loopback ports into it). The child sees Isolated()
// true. Its process (unshare) is already in the new namespaces, so
// DialIn with its pid reaches the child's network.
func IsolatedCommand(args ...string) (*exec.Cmd, error) {
	if os.Geteuid() != 0 {
		return nil, fmt.Errorf("a node cluster needs root (network and mount namespaces, containerd, a kubelet)")
	}
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return nil, fmt.Errorf("a node cluster needs unshare(1) from util-linux: %w", err)
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(unshare, append([]string{"--net", "--mount", "--propagation", "unchanged", "--fork", "--kill-child", "--", self}, args...)...)
	cmd.Env = append(os.Environ(), isolatedEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd, nil
}

// InIsolatedChild reports whether this process was started by
// IsolatedCommand or RunIsolated (and so must set up the node network and
// run the cluster).
func InIsolatedChild() bool { return os.Getenv(isolatedEnv) == "1" }

// EnterIsolated finishes what IsolatedCommand began, in the child: it sets
// up the node network and marks the process isolated.
func EnterIsolated() error {
	if !InIsolatedChild() {
		return fmt.Errorf("not started through cluster.IsolatedCommand")
	}
	if err := makeMountsPrivate(); err != nil {
		return err
	}
	if err := setUpNodeNetwork(); err != nil {
		return fmt.Errorf("node network: %w", err)
	}
	isolationProblem = ""
	return nil
}

// DialIn connects to addr from inside the network namespace of process
// pid. The dial runs on an OS thread switched into that namespace; the
// socket keeps the namespace it was made in, and the thread is never
// returned to the runtime (it exits with its goroutine), so no other
// goroutine ever runs in the wrong namespace.
func DialIn(ctx context.Context, pid int, addr string) (net.Conn, error) {
	type result struct {
		conn net.Conn
		err  error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread() // deliberately never unlocked
		f, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			done <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("enter network namespace of %d: %w", pid, err)}
			return
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		done <- result{conn: c, err: err}
	}()
	r := <-done
	return r.conn, r.err
}

// makeMountsPrivate stops mounts made in this mount namespace from
// propagating to the machine's. unshare(1) is started with
// --propagation unchanged because inside the build's chroot / is not a
// mount point and cannot be changed; so each mount point is made private
// here instead (the whole tree at once where / is one).
func makeMountsPrivate() error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err == nil {
		return nil
	}
	points, err := mountPoints()
	if err != nil {
		return err
	}
	for _, p := range points {
		if err := unix.Mount("", p, "", unix.MS_PRIVATE, ""); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			return fmt.Errorf("make %s private: %w", p, err)
		}
	}
	return nil
}
