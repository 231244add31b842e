//go:build !linux

package testbin

import "syscall"

// ChildSysProcAttr has no parent-death signal to set outside Linux; a test's
// cleanup is the only guard there.
func ChildSysProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
