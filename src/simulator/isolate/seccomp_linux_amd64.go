package isolate

import "golang.org/x/sys/unix"

const nativeAuditArch = unix.AUDIT_ARCH_X86_64

// foreignABIBit marks x32 system calls, which share x86-64's audit arch.
const foreignABIBit = 0x40000000

// archDeniedSyscalls are the x86-64 calls without an arm64 counterpart:
// raw port I/O and the old shared-library loader.
var archDeniedSyscalls = []uint32{unix.SYS_IOPL, unix.SYS_IOPERM, unix.SYS_USELIB}
