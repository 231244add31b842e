package testbin

import "syscall"

// ChildSysProcAttr makes the kernel kill a process a test starts when the
// test process dies without running its cleanups (a panic, a timeout,
// SIGKILL), so no server outlives the run that started it.
func ChildSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
