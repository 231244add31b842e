package isolate

import (
	"fmt"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The sandbox's system call filter: a deny list in the manner of container
// runtimes' default profiles. Everything is allowed except the calls that
// reach kernel state shared with the host or with other sandboxes, or that
// widen the attack surface without a use inside a sandbox:
//
//   - the kernel keyrings (add_key, keyctl, request_key): keys are kept per
//     uid, and uids inside are the host's, so a key added in one sandbox
//     would be readable in every other and on the host;
//   - new namespaces (unshare, setns, clone with a CLONE_NEW* flag): a user
//     namespace made inside would hand its creator every capability the
//     bounding set took away, over its own mounts and network;
//   - mounting in any form, module loading, kexec, swap, reboot, accounting,
//     quotas, the clock, eBPF, perf events, userfaultfd, io_uring and
//     open_by_handle_at, most of which the dropped capabilities already
//     refuse: the filter holds should a capability come back.
//
// clone3 answers ENOSYS rather than EPERM: its flags sit behind a pointer a
// filter cannot read, and ENOSYS makes the C library fall back to clone,
// whose flags it can.
//
// The filter is installed by the init on the thread that forks the program
// (it is inherited across fork and execve and cannot be removed), so the
// program and everything it starts run under it; the init itself does not.

// seccompData offsets (struct seccomp_data: nr, arch, instruction_pointer,
// args[6]).
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16 // low 32 bits on a little-endian machine
)

// cloneNamespaceFlags are the CLONE_NEW* flags clone(2) takes (CLONE_NEWTIME
// only exists for clone3 and unshare, both refused whole).
const cloneNamespaceFlags = unix.CLONE_NEWNS | unix.CLONE_NEWCGROUP | unix.CLONE_NEWUTS |
	unix.CLONE_NEWIPC | unix.CLONE_NEWUSER | unix.CLONE_NEWPID | unix.CLONE_NEWNET

// deniedSyscalls answer EPERM on every architecture; archDeniedSyscalls
// (per architecture) adds those only some have.
var deniedSyscalls = []uint32{
	unix.SYS_ADD_KEY, unix.SYS_KEYCTL, unix.SYS_REQUEST_KEY,
	unix.SYS_UNSHARE, unix.SYS_SETNS,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_SWAPON, unix.SYS_SWAPOFF, unix.SYS_REBOOT, unix.SYS_ACCT,
	unix.SYS_QUOTACTL, unix.SYS_LOOKUP_DCOOKIE,
	unix.SYS_SETTIMEOFDAY, unix.SYS_CLOCK_SETTIME, unix.SYS_CLOCK_ADJTIME, unix.SYS_ADJTIMEX,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_OPEN_BY_HANDLE_AT, unix.SYS_VHANGUP, unix.SYS_SYSLOG,
}

// seccompFilter assembles the filter for this architecture.
func seccompFilter() []unix.SockFilter {
	const (
		ldW  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq  = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge  = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		jset = unix.BPF_JMP | unix.BPF_JSET | unix.BPF_K
		ret  = unix.BPF_RET | unix.BPF_K
	)
	allow := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ALLOW}
	eperm := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)}
	enosys := unix.SockFilter{Code: ret, K: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS)}

	var f []unix.SockFilter
	// Another architecture's calls (a 32-bit binary on a 64-bit kernel)
	// carry other numbers the list below would not catch: refused whole.
	f = append(f,
		unix.SockFilter{Code: ldW, K: offArch},
		unix.SockFilter{Code: jeq, K: nativeAuditArch, Jt: 1},
		enosys,
		unix.SockFilter{Code: ldW, K: offNr},
	)
	if foreignABIBit != 0 { // x32 on x86-64: same arch, numbers with a high bit
		f = append(f, unix.SockFilter{Code: jge, K: foreignABIBit, Jf: 1}, enosys)
	}
	for _, nr := range append(append([]uint32(nil), deniedSyscalls...), archDeniedSyscalls...) {
		f = append(f, unix.SockFilter{Code: jeq, K: nr, Jf: 1}, eperm)
	}
	f = append(f,
		unix.SockFilter{Code: jeq, K: unix.SYS_CLONE3, Jf: 1}, enosys,
		unix.SockFilter{Code: jeq, K: unix.SYS_CLONE, Jf: 3},
		unix.SockFilter{Code: ldW, K: offArg0},
		unix.SockFilter{Code: jset, K: cloneNamespaceFlags, Jf: 1},
		eperm,
		allow,
	)
	return f
}

// installSeccomp puts the calling thread under the sandbox's filter. The
// caller must hold CAP_SYS_ADMIN (the init does), be locked to its thread
// and fork the program from it: the filter binds this thread and what it
// starts, not the rest of the init.
func installSeccomp() error {
	filter := seccompFilter()
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&prog)), 0, 0); err != nil {
		return fmt.Errorf("install the system call filter: %w", err)
	}
	return nil
}
