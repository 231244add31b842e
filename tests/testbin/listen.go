package testbin

import (
	"fmt"
	"net"
	"os"
	"strings"
)

// The socket-activation variables (see src/serve's package comment); the
// names are systemd's, spelled here so that testbin does not pull in
// src/serve's dependencies.
const (
	ListenFDsEnv     = "LISTEN_FDS"
	ListenFDNamesEnv = "LISTEN_FDNAMES"
	ListenPIDEnv     = "LISTEN_PID"
)

// Listen binds a loopback TCP port (the kernel picks it) for a server a
// test starts: pass it to StartProcess, and its address in the flag the
// server listens by. The port stays bound from here until the server ends,
// so no other process can take it in between, as one could with a port
// picked by binding, closing and handing on its number.
func Listen() (*net.TCPListener, error) {
	ln, err := net.ListenTCP("tcp", &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		return nil, fmt.Errorf("bind a loopback port for a child server: %w", err)
	}
	return ln, nil
}

// listenerFiles are duplicates of listeners' sockets for exec.Cmd's
// ExtraFiles, and their names for LISTEN_FDNAMES ("tcp-127.0.0.1-8080": a
// name may not hold a colon). The caller closes the files.
func listenerFiles(listeners []*net.TCPListener) ([]*os.File, []string, error) {
	var files []*os.File
	var names []string
	for _, ln := range listeners {
		f, err := ln.File()
		if err != nil {
			for _, f := range files {
				_ = f.Close()
			}
			return nil, nil, fmt.Errorf("hand over the listener on %s: %w", ln.Addr(), err)
		}
		files = append(files, f)
		names = append(names, "tcp-"+strings.NewReplacer(":", "-", "[", "", "]", "").Replace(ln.Addr().String()))
	}
	return files, names, nil
}

// withoutSocketActivation is env without the socket-activation variables:
// a child gets them only for the listeners StartProcess hands it, never
// from the test's own environment.
func withoutSocketActivation(env []string) []string {
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if name == ListenFDsEnv || name == ListenFDNamesEnv || name == ListenPIDEnv {
			continue
		}
		out = append(out, kv)
	}
	return out
}
