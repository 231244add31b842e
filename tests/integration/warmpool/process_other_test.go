//go:build !linux

package warmpool_test

import "syscall"

// childSysProcAttr has no parent-death signal to set outside Linux; the
// test's cleanup is the only guard there.
func childSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
