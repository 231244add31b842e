//go:build linux

package isolate_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	limitHelpers["syscalls"] = helperSyscalls
}

// helperSyscalls tries, as root inside, each kind of call the sandbox's
// filter and bounding set refuse, and one ordinary call of each family
// that must still work, printing "<name>: <error or ok>" per line.
func helperSyscalls(string) {
	try := func(name string, err error) {
		if err == nil {
			fmt.Printf("%s: ok\n", name)
			return
		}
		fmt.Printf("%s: %v\n", name, err)
	}
	status, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(status), "\n") {
		if strings.HasPrefix(l, "Seccomp:") {
			fmt.Println("status " + strings.Join(strings.Fields(l), " "))
		}
	}
	// The session keyring is per uid without a user namespace: a key
	// here would be readable by the same uid in every sandbox and on the
	// host (the probe read one across tenants).
	_, err := unix.AddKey("user", "probe", []byte("secret"), unix.KEY_SPEC_USER_KEYRING)
	try("add_key", err)
	_, err = unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_USER_KEYRING, 0, 0, 0)
	try("keyctl", err)
	try("unshare-user", unix.Unshare(unix.CLONE_NEWUSER))
	try("unshare-net", unix.Unshare(unix.CLONE_NEWNET))
	_, _, errno := unix.RawSyscall6(unix.SYS_CLONE, uintptr(unix.CLONE_NEWUSER|unix.SIGCHLD), 0, 0, 0, 0, 0)
	try("clone-newuser", errnoErr(errno))
	try("mount", unix.Mount("tmpfs", "/mnt", "tmpfs", 0, ""))
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0)
	closeFD(fd)
	try("packet-socket", err)
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_ICMP)
	closeFD(fd)
	try("raw-socket", err)
	var params [120]byte // struct io_uring_params
	r, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 4, uintptr(unsafe.Pointer(&params[0])), 0)
	closeFD(int(r))
	try("io_uring", errnoErr(errno))
	_, _, errno = unix.Syscall(unix.SYS_CLONE3, 0, 0, 0)
	try("clone3", errnoErr(errno))
	// Ordinary calls of the same families.
	fd, err = unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)
	closeFD(fd)
	try("tcp-socket", err)
	try("chdir", unix.Chdir("/"))
}

func errnoErr(e unix.Errno) error {
	if e == 0 {
		return nil
	}
	return e
}

func closeFD(fd int) {
	if fd > 0 {
		unix.Close(fd)
	}
}

// TestSyscallFilterInside: root inside runs under the seccomp filter, so
// the kernel keyring, new namespaces, mounts, raw and packet sockets and
// io_uring are refused, while ordinary calls work.
func TestSyscallFilterInside(t *testing.T) {
	requireRoot(t)
	sb := rootSandbox(t, "seccomp", nil)
	out := mustOut(t, sb, request{Op: "helper", Data: "syscalls"})
	got := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, ": "); ok {
			got[k] = v
		}
	}
	want := map[string]string{
		"status Seccomp": "2",
		"add_key":        "operation not permitted",
		"keyctl":         "operation not permitted",
		"unshare-user":   "operation not permitted",
		"unshare-net":    "operation not permitted",
		"clone-newuser":  "operation not permitted",
		"mount":          "operation not permitted",
		"packet-socket":  "operation not permitted",
		"raw-socket":     "operation not permitted",
		"io_uring":       "operation not permitted",
		"clone3":         "function not implemented",
		"tcp-socket":     "ok",
		"chdir":          "ok",
	}
	if v, ok := strings.CutPrefix(out, "status Seccomp: "); ok {
		got["status Seccomp"], _, _ = strings.Cut(v, "\n")
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s inside: %q, want %q", k, got[k], w)
		}
	}
	if t.Failed() {
		t.Logf("helper said:\n%s", out)
	}
	// The sandbox works on after the refusals.
	if got := mustOut(t, sb, request{Op: "helper", Data: "hello"}); got != "ran" {
		t.Errorf("a command after the refusals said %q", got)
	}
}
