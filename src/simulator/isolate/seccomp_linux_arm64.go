package isolate

import "golang.org/x/sys/unix"

const nativeAuditArch = unix.AUDIT_ARCH_AARCH64

// foreignABIBit is 0: arm64 has no second ABI under its own audit arch
// (32-bit arm calls carry AUDIT_ARCH_ARM and are refused by arch).
const foreignABIBit = 0

var archDeniedSyscalls = []uint32{}
