// Command pause holds a pod's namespaces open: it is the program of the
// sandbox ("infra") container that a container runtime such as containerd
// starts first in every pod, and the entrypoint of the project's pause
// image (//images:pause, see docs/images.md).
//
// It does nothing until it receives SIGTERM or SIGINT, then exits with
// status 0. When the pod shares one PID namespace it runs as PID 1 there, so
// every process orphaned in the pod becomes its child: it reaps each child
// that exits (on SIGCHLD), so none lingers as a zombie. It takes no
// arguments and writes nothing on success.
package main

import (
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// stopSignals end the program; SIGCHLD only wakes it to reap.
var stopSignals = []os.Signal{syscall.SIGTERM, syscall.SIGINT}

func main() {
	if len(os.Args) > 1 {
		fmt.Fprintln(os.Stderr, "usage: pause (no arguments; exits 0 on SIGTERM or SIGINT)")
		os.Exit(2)
	}
	waitForStop(notifySignals())
	os.Exit(0)
}

// notifySignals starts delivering SIGCHLD and the stop signals to the
// returned channel; from then on a stop signal no longer kills the process.
func notifySignals() <-chan os.Signal {
	signals := make(chan os.Signal, 16)
	signal.Notify(signals, append([]os.Signal{syscall.SIGCHLD}, stopSignals...)...)
	return signals
}

// waitForStop reaps exited children on every SIGCHLD and returns the first
// stop signal it receives. A burst of child exits may arrive as a single
// SIGCHLD (and Notify drops signals when the channel is full), so each
// wake-up reaps every child that has exited so far.
func waitForStop(signals <-chan os.Signal) os.Signal {
	for sig := range signals {
		if sig == syscall.SIGCHLD {
			reapChildren()
			continue
		}
		return sig
	}
	return nil
}

// reapChildren collects every child that has exited, without blocking, and
// returns how many it collected.
func reapChildren() int {
	n := 0
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil || pid <= 0:
			// ECHILD: no children at all; pid 0: none has exited yet.
			return n
		}
		n++
	}
}
