//go:build !linux

package cluster

import "syscall"

// childSysProcAttr has no parent-death signal to set outside Linux; the
// cleanup that stops the cluster is the only guard there.
func childSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{}
}
