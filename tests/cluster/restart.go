package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
)

// Restarts, for fault tests: the kube-apiserver can be killed as a crash
// would kill it and started again, and etcd stopped and started again,
// each on the address it had, so that every client (kubeconfigs, the
// kube-apiserver's --etcd-servers, an aggregated server's informers) finds
// it where it was. A test applies its load between the stop and the start.
//
//	err := c.KillAPIServer()            // SIGKILL; clients see refused connections
//	err = c.StartAPIServer(ctx)         // same port, flags, certificates, etcd; waits for /readyz
//	err = c.RestartAPIServer(ctx)       // both
//
//	err = c.StopEtcd()                  // closes the embedded etcd; its data stays
//	err = c.StartEtcd(ctx)              // same URLs and data; waits for etcd, not the kube-apiserver
//	err = c.RestartEtcd(ctx, 5*time.Second)
//	err = c.WaitReady(ctx)              // the kube-apiserver's /readyz, which checks etcd
//
// The ports are the ones the first start chose. Nothing holds them while
// the part is down, so another process could in principle bind one in
// between; a start that finds its port taken tries again for
// rebindAttempts × rebindPause before it gives up, since no other port
// would do.

// rebindAttempts and rebindPause bound how long a restart waits for its
// old port: long enough for a socket still closing to let go of it, short
// enough that a port another process has taken fails the test promptly.
const (
	rebindAttempts = 10
	rebindPause    = 500 * time.Millisecond
)

// errStopped refuses a restart of a cluster that Stop has stopped.
var errStopped = errors.New("cluster: stopped")

// KillAPIServer sends SIGKILL to the kube-apiserver, as a crash or the
// OOM killer would end it, and waits until the process is reaped. Its
// clients' connections are reset and new ones refused until
// StartAPIServer. Killing a process that has already exited is no error.
func (c *Cluster) KillAPIServer() error {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	if c.stopped {
		return errStopped
	}
	return c.apiserver.kill()
}

// StartAPIServer starts the kube-apiserver again, after KillAPIServer, on
// the port it had, with the same flags, certificates, token file and etcd,
// appending to its log, and waits until its /readyz answers OK or ctx
// ends. A kube-apiserver that still runs is an error: the port is its.
func (c *Cluster) StartAPIServer(ctx context.Context) error {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	if c.stopped {
		return errStopped
	}
	old := c.apiserver
	select {
	case <-old.exited:
	default:
		return fmt.Errorf("start kube-apiserver: it still runs as pid %d; kill it first", old.cmd.Process.Pid)
	}
	admin, _ := c.users.lookup(AdminUser)
	for attempt := 1; ; attempt++ {
		offset := logSize(old.logPath)
		p, err := runAPIServer(c.apiserverCfg, old.port, os.O_APPEND)
		if err != nil {
			return fmt.Errorf("restart kube-apiserver: %w", err)
		}
		// From here Stop sees the new process, whatever follows.
		c.apiserver = p
		err = p.waitReady(ctx, c.pki.servingCA.certPEM, admin.token)
		if err == nil {
			return nil
		}
		if attempt == rebindAttempts || !logSinceContains(p.logPath, offset, "address already in use") {
			return fmt.Errorf("restart kube-apiserver on port %d: %w", old.port, err)
		}
		_ = p.stop() // reaped already; closes its log
		if err := sleepCtx(ctx, rebindPause); err != nil {
			return fmt.Errorf("restart kube-apiserver: port %d still taken: %w", old.port, err)
		}
	}
}

// RestartAPIServer kills the kube-apiserver and starts it again (see
// KillAPIServer and StartAPIServer).
func (c *Cluster) RestartAPIServer(ctx context.Context) error {
	if err := c.KillAPIServer(); err != nil {
		return err
	}
	return c.StartAPIServer(ctx)
}

// StopEtcd stops the embedded etcd and keeps its data directory. Its
// listeners close at once, so the kube-apiserver's requests fail from the
// start; the call itself returns only once etcd has let go of open watch
// streams, which embed bounds by etcd's request timeout (about 7 s).
// Stopping an etcd already stopped is no error.
func (c *Cluster) StopEtcd() error {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	if c.stopped {
		return errStopped
	}
	c.etcd.stop()
	return nil
}

// StartEtcd starts the embedded etcd again, after StopEtcd, on the client
// and peer addresses it had (the kube-apiserver's --etcd-servers names the
// client one) and from the same data directory, appending to its log, and
// waits until etcd is ready or ctx ends. It does not wait for the
// kube-apiserver to reconnect: WaitReady does.
func (c *Cluster) StartEtcd(ctx context.Context) error {
	c.procMu.Lock()
	defer c.procMu.Unlock()
	if c.stopped {
		return errStopped
	}
	old := c.etcd
	if !old.stopped {
		return errors.New("start etcd: it still runs; stop it first")
	}
	clientAddr := strings.TrimPrefix(old.url, "http://")
	for attempt := 1; ; attempt++ {
		s, err := runEtcd(ctx, c.dir, clientAddr, old.peerAddr, os.O_APPEND)
		if err == nil {
			c.etcd = s
			return nil
		}
		if attempt == rebindAttempts || !strings.Contains(err.Error(), "address already in use") {
			return fmt.Errorf("restart etcd on %s: %w", clientAddr, err)
		}
		if err := sleepCtx(ctx, rebindPause); err != nil {
			return fmt.Errorf("restart etcd: %s still taken: %w", clientAddr, err)
		}
	}
}

// RestartEtcd stops etcd, keeps it down for down (counted from the start
// of the stop, which itself takes a few seconds; see StopEtcd) and starts
// it again (see StartEtcd).
func (c *Cluster) RestartEtcd(ctx context.Context, down time.Duration) error {
	began := time.Now()
	if err := c.StopEtcd(); err != nil {
		return err
	}
	if err := sleepCtx(ctx, time.Until(began.Add(down))); err != nil {
		return fmt.Errorf("restart etcd: %w", err)
	}
	return c.StartEtcd(ctx)
}

// WaitReady waits until the kube-apiserver's /readyz, which includes its
// etcd check, answers OK, or ctx ends; after StartEtcd it says when the
// kube-apiserver has its storage back.
func (c *Cluster) WaitReady(ctx context.Context) error {
	c.procMu.Lock()
	p := c.apiserver
	c.procMu.Unlock()
	admin, _ := c.users.lookup(AdminUser)
	return p.waitReady(ctx, c.pki.servingCA.certPEM, admin.token)
}

// kill sends SIGKILL and waits until the process is reaped, then closes
// its log.
func (p *apiServerProcess) kill() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	if err := p.cmd.Process.Kill(); err != nil {
		// Only a process that has exited meanwhile refuses the signal.
		select {
		case <-p.exited:
		default:
			return fmt.Errorf("kill kube-apiserver: %w", err)
		}
	}
	<-p.exited
	p.logFile.Close()
	return nil
}

// logSize is the length of the file at path, 0 when it cannot be read.
func logSize(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}

// logSinceContains reports whether the file at path holds want past
// offset, that is, in what the latest process wrote.
func logSinceContains(path string, offset int64, want string) bool {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) < offset {
		return false
	}
	return strings.Contains(string(b[offset:]), want)
}

// sleepCtx waits for d or until ctx ends, whichever is first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
