package cluster

import "syscall"

// childSysProcAttr makes the kernel kill the kube-apiserver when the test
// process dies without running its cleanups (a panic, a timeout, SIGKILL),
// so no apiserver outlives the test that started it.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
