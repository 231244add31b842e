package apiserverenv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// Options are what Start runs sandbox-apiserver with.
type Options struct {
	// Binary is the sandbox-apiserver executable (see Binary). Required.
	Binary string
	// Dir receives the serving certificate, its key and the server's log
	// (LogPath). Required.
	Dir string
	// SandboxdTokenFile holds the token the server presents to the fleet's
	// nodes (see WriteSandboxdToken). Required.
	SandboxdTokenFile string
	// InventoryStaleAfter is how long after a node's last NodeInventory
	// publish the server drops it; zero leaves the server's default.
	InventoryStaleAfter time.Duration
	// ExtraArgs follow the flags Start sets (the e2b surface's, say); a
	// flag given twice takes its later value.
	ExtraArgs []string
}

// logLevelEnv makes the server log at info, so a failure's log tail shows
// what it did rather than only what went wrong.
const logLevelEnv = "OPERATOR_LOG_LEVEL=info"

// stopGrace is how long the server gets to shut down after SIGTERM.
const stopGrace = 20 * time.Second

// Server is a sandbox-apiserver process serving the aggregated API of c.
type Server struct {
	proc    *testbin.Process
	cluster *cluster.Cluster
	// addr is the host:port the aggregator dials (the Service's ClusterIP
	// on loopback), and where /readyz is polled.
	addr  string
	caPEM []byte
}

// Start makes serving certificates, registers the APIService for Group and
// Version in c with their CA as caBundle, and starts the binary on the
// address the aggregator will dial. It does not wait: see WaitReady.
func Start(ctx context.Context, c *cluster.Cluster, opts Options) (*Server, error) {
	if opts.Binary == "" || opts.Dir == "" || opts.SandboxdTokenFile == "" {
		return nil, errors.New("start sandbox-apiserver: Binary, Dir and SandboxdTokenFile are required")
	}
	certs, err := cluster.NewServingCerts(opts.Dir, servingDNSName)
	if err != nil {
		return nil, fmt.Errorf("sandbox-apiserver serving certificates: %w", err)
	}
	ln, err := c.RegisterAPIService(ctx, cluster.APIServiceSpec{
		Group: Group, Version: Version,
		Namespace: Namespace, ServiceName: ServiceName,
		CABundle: certs.CAPEM,
	})
	if err != nil {
		return nil, err
	}
	// The server takes the bound socket (src/serve's inherited listeners)
	// for its --bind-address and --secure-port.
	addr := ln.Addr().String()
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("APIService address %q: %w", addr, err)
	}
	args := opts.args(host, port, certs, c.Kubeconfig())
	proc, err := testbin.StartProcess("sandbox-apiserver", opts.Binary, filepath.Join(opts.Dir, "sandbox-apiserver.log"), args, []string{logLevelEnv}, ln)
	if err != nil {
		return nil, err
	}
	return &Server{proc: proc, cluster: c, addr: addr, caPEM: certs.CAPEM}, nil
}

// Pid is the server's process id, for reading its usage from /proc.
func (s *Server) Pid() int { return s.proc.Pid() }

// ExitErr is nil while the server runs, and says how it ended afterwards.
func (s *Server) ExitErr() error { return s.proc.ExitErr() }

// LogPath is the file holding the server's output.
func (s *Server) LogPath() string { return s.proc.LogPath() }

// LogTail returns the last n lines of the server's log, labelled.
func (s *Server) LogTail(n int) string { return s.proc.LogTail(n) }

// Stop sends SIGTERM, then SIGKILL after a grace period, and waits. A
// server that had already exited is an error: whatever ran against it was
// at some point talking to a dead server.
func (s *Server) Stop() error { return s.proc.Stop(stopGrace) }
