package warmpool_test

import "syscall"

// childSysProcAttr makes the kernel kill a sandbox-apiserver replica when
// the test process dies without running its cleanups (a panic, a timeout,
// SIGKILL), so no replica outlives the run that started it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
