package apiserver_test

import "syscall"

// childSysProcAttr makes the kernel kill the sandbox-apiserver when the
// test process dies without running TestMain's teardown (a panic, a
// timeout, SIGKILL), so no server outlives the run that started it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
