package isolate

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// envProbeRootless tells the probe to mount as a rootless init would.
const envProbeRootless = "ISOLATE_PROBE_ROOTLESS"

var (
	availableOnce sync.Once
	availableErr  error
)

// Available reports whether sandboxes can be isolated here, or what is
// missing. Besides static checks it runs one trial: a re-executed child in
// the same namespaces that mounts an overlay, since only that shows what a
// kernel, its configuration and any security module really allow. The
// answer is computed once per process.
func Available() error {
	availableOnce.Do(func() { availableErr = checkAvailable() })
	return availableErr
}

func checkAvailable() error {
	if !initCalled.Load() {
		return errors.New("isolate: isolate.Init was not called at the start of main (or TestMain); the re-executed sandbox init would run main instead")
	}
	rootless := os.Geteuid() != 0
	nss := []string{"mnt", "pid", "net", "uts", "ipc"}
	if rootless {
		nss = append(nss, "user")
	}
	for _, ns := range nss {
		if _, err := os.Stat("/proc/self/ns/" + ns); err != nil {
			return fmt.Errorf("isolate: the kernel has no %s namespaces: %w", ns, err)
		}
	}
	if rootless {
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_userns_clone"); err == nil && strings.TrimSpace(string(b)) == "0" {
			return errors.New("isolate: not root and unprivileged user namespaces are disabled (kernel.unprivileged_userns_clone=0)")
		}
		if b, err := os.ReadFile("/proc/sys/user/max_user_namespaces"); err == nil && strings.TrimSpace(string(b)) == "0" {
			return errors.New("isolate: not root and user namespaces are disabled (user.max_user_namespaces=0)")
		}
	}
	return probe(rootless)
}

// probe runs runProbe in a child with the sandbox namespaces.
func probe(rootless bool) error {
	dir, err := os.MkdirTemp("", "isolate-probe-")
	if err != nil {
		return fmt.Errorf("isolate: probe: %w", err)
	}
	defer os.RemoveAll(dir)
	var stderr bytes.Buffer
	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"isolate-probe"}
	cmd.Env = []string{envStage + "=" + stageProbe, envProbe + "=" + dir}
	if rootless {
		cmd.Env = append(cmd.Env, envProbeRootless+"=1")
	}
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
		Pdeathsig:  syscall.SIGKILL,
	}
	if rootless {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
	}
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = err.Error()
		}
		return fmt.Errorf("isolate: namespaces or overlayfs unavailable: %s", msg)
	}
	return nil
}

// runProbe tries, in its own namespaces, what a sandbox init does first:
// private mounts, a tmpfs, an overlay on it, a hostname, a loopback.
func runProbe() {
	fail := func(step string, err error) {
		fmt.Fprintf(os.Stderr, "%s: %v", step, err)
		os.Exit(1)
	}
	dir := os.Getenv(envProbe)
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("make mounts private", err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m"); err != nil {
		fail("mount tmpfs", err)
	}
	for _, d := range []string{"lower", "upper", "work", "merged"} {
		if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
			fail("mkdir", err)
		}
	}
	opts := overlayOptions(filepath.Join(dir, "lower"), filepath.Join(dir, "upper"), filepath.Join(dir, "work"), os.Getenv(envProbeRootless) != "")
	if err := unix.Mount("overlay", filepath.Join(dir, "merged"), "overlay", 0, opts); err != nil {
		fail("mount overlayfs", err)
	}
	if err := unix.Sethostname([]byte("probe")); err != nil {
		fail("sethostname", err)
	}
	if err := loopbackUp(); err != nil {
		fail("loopback", err)
	}
	os.Exit(0)
}
