package isolate

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// droppedCaps are the capabilities whose reach goes beyond the sandbox's own
// namespaces: with them a root inside could load kernel code, touch raw
// devices or host files (open_by_handle_at), undo the mount setup, ptrace
// the init (which keeps full capabilities), set the host's clock, or pin
// files so Close cannot delete them. CAP_SYS_NICE and CAP_SYS_RESOURCE go
// too: with them root inside could take CPU priority over other sandboxes
// (nice -20, real-time scheduling), or raise RLIMIT_NICE and do the same
// without CAP_SYS_NICE. CAP_NET_ADMIN and CAP_NET_RAW go as well: the
// network inside is set up by the init before the program starts, and root
// inside has no business reconfiguring it, sniffing it or forging packets
// with raw or packet sockets. Everything else a root inside usually needs (chown,
// setuid for sudo/su, binding low ports, kill inside) stays.
//
// Ptracing a process of the same uid needs no capability, only that it be
// dumpable and hold no capability the tracer lacks: the init keeps its
// full set, and the program makes itself non-dumpable (setNotDumpable);
// root inside can still ptrace the processes it starts itself.
var droppedCaps = []uintptr{
	unix.CAP_SYS_MODULE,
	unix.CAP_SYS_RAWIO,
	unix.CAP_SYS_ADMIN,
	unix.CAP_SYS_BOOT,
	unix.CAP_SYS_TIME,
	unix.CAP_SYS_PTRACE,
	unix.CAP_SYS_NICE,
	unix.CAP_SYS_RESOURCE,
	unix.CAP_SYS_PACCT,
	unix.CAP_DAC_READ_SEARCH,
	unix.CAP_MKNOD,
	unix.CAP_LINUX_IMMUTABLE,
	unix.CAP_MAC_ADMIN,
	unix.CAP_MAC_OVERRIDE,
	unix.CAP_AUDIT_CONTROL,
	unix.CAP_SYSLOG,
	unix.CAP_WAKE_ALARM,
	unix.CAP_BLOCK_SUSPEND,
	unix.CAP_BPF,
	unix.CAP_PERFMON,
	unix.CAP_NET_ADMIN,
	unix.CAP_NET_RAW,
}

// dropBoundingCaps removes droppedCaps from the calling thread's bounding
// set; the caller must be locked to its thread and fork from it.
func dropBoundingCaps() error {
	for _, c := range droppedCaps {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, c, 0, 0, 0)
		// EINVAL: the kernel predates this capability; nothing to drop.
		if err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("drop capability %d: %w", c, err)
		}
	}
	return nil
}
