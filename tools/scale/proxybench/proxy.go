package proxybench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	// ProxyBinaryEnv names the variable holding the sandbox-envd-proxy
	// binary's runfiles location under Bazel; unset, the binary is built
	// with go build (testbin.Locate).
	ProxyBinaryEnv = "SANDBOX_ENVD_PROXY"
	// ProxyPackage is the binary's main package.
	ProxyPackage = "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-envd-proxy"

	// proxyStopGrace is how long the proxy gets to drain after SIGTERM.
	proxyStopGrace = 15 * time.Second
	// startAttempts covers losing the chosen port to another process
	// between picking it and the proxy binding it.
	startAttempts = 3
)

// proxyProcess is a running sandbox-envd-proxy.
type proxyProcess struct {
	*testbin.Process
	addr string // host:port it listens on
}

// proxyArgs is the command line: cleartext on loopback (HTTP/1.1 and
// h2c, as behind a TLS-terminating edge), the cluster's NodeInventory,
// routing under domain.
type proxyArgs struct {
	kubeconfig, domain, namespace, secretFile, tokenFile string
}

func (a proxyArgs) flags(addr string) []string {
	return []string{
		"--bind-address=" + addr,
		"--domain=" + a.domain,
		"--namespace=" + a.namespace,
		"--kubeconfig=" + a.kubeconfig,
		"--e2b-envd-secret-file=" + a.secretFile,
		"--sandboxd-token-file=" + a.tokenFile,
	}
}

// startProxy runs the binary in dir and waits until its /healthz answers
// 200, which it does once its NodeInventory informer has synced.
func startProxy(ctx context.Context, binary, dir string, args proxyArgs, timeout time.Duration) (*proxyProcess, error) {
	var lastErr error
	for attempt := 1; attempt <= startAttempts; attempt++ {
		addr, err := freeLoopbackAddr()
		if err != nil {
			return nil, err
		}
		logPath := filepath.Join(dir, fmt.Sprintf("sandbox-envd-proxy-%d.log", attempt))
		// warn: at debug the proxy logs one line per request, which would
		// be part of what is measured.
		p, err := testbin.StartProcess("sandbox-envd-proxy", binary, logPath, args.flags(addr), []string{"OPERATOR_LOG_LEVEL=warn"})
		if err != nil {
			return nil, err
		}
		pp := &proxyProcess{Process: p, addr: addr}
		err = pp.waitHealthy(ctx, timeout)
		if err == nil {
			return pp, nil
		}
		_ = p.Kill()
		lastErr = fmt.Errorf("%w\n%s", err, p.LogTail(30))
		if !portTaken(logPath) {
			return nil, lastErr
		}
	}
	return nil, lastErr
}

func (p *proxyProcess) waitHealthy(ctx context.Context, timeout time.Duration) error {
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true}, Timeout: 5 * time.Second}
	deadline := time.Now().Add(timeout)
	last := "no answer yet"
	for {
		if err := p.ExitErr(); err != nil {
			return err
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/healthz", nil)
		if err != nil {
			return err
		}
		if resp, err := hc.Do(req); err != nil {
			last = err.Error()
		} else {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("sandbox-envd-proxy not healthy within %v (last /healthz: %s)", timeout, last)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for sandbox-envd-proxy: %w", ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// stop ends the proxy with SIGTERM; an error says it had died before.
func (p *proxyProcess) stop() error {
	if err := p.Stop(proxyStopGrace); err != nil {
		return fmt.Errorf("stopping sandbox-envd-proxy: %w\n%s", err, p.LogTail(30))
	}
	return nil
}

func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("finding a free loopback port: %w", err)
	}
	defer l.Close()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(l.Addr().(*net.TCPAddr).Port)), nil
}

func portTaken(logPath string) bool {
	b, err := os.ReadFile(logPath)
	return err == nil && strings.Contains(string(b), "address already in use")
}

// writeSecret writes content to a 0600 file in dir.
func writeSecret(dir, name, content string) (string, error) {
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, []byte(content+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", name, err)
	}
	return path, nil
}
