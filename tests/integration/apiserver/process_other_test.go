//go:build !linux

package apiserver_test

import "syscall"

// childSysProcAttr has no parent-death signal to ask for outside Linux;
// TestMain's teardown stops the server.
func childSysProcAttr() *syscall.SysProcAttr { return nil }
