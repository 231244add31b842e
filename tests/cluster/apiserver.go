package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// ServiceIPRange is the kube-apiserver's --service-cluster-ip-range. It is
// a loopback range so that a Service's ClusterIP is an address a test can
// bind: the aggregator dials an APIService's Service at its ClusterIP
// (--enable-aggregator-routing=false), and on Linux every address in
// 127.0.0.0/8 is local. The kubernetes Service takes 127.0.0.1.
const ServiceIPRange = "127.0.0.0/24"

// stopGrace is how long the kube-apiserver gets to shut down after SIGTERM
// before it is killed.
const stopGrace = 15 * time.Second

// apiServerProcess is a running kube-apiserver.
type apiServerProcess struct {
	cmd     *exec.Cmd
	port    int
	logPath string
	logFile *os.File
	exited  chan struct{} // closed when the process has been reaped
	waitErr error         // set before exited is closed
}

// apiServerConfig is everything the process is started with.
type apiServerConfig struct {
	binary     string
	dir        string
	etcdURL    string
	files      pkiFiles
	tokenFile  string
	extraFlags []string
}

// flags returns the kube-apiserver command line for port.
func (c apiServerConfig) flags(port int) []string {
	flags := []string{
		"--etcd-servers=" + c.etcdURL,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + c.files.servingCert,
		"--tls-private-key-file=" + c.files.servingKey,
		// Nothing is written here with explicit serving files; set so a
		// stray default never points outside the test's directory.
		"--cert-dir=" + filepath.Join(c.dir, "cert-dir"),
		"--client-ca-file=" + c.files.clientCA,
		"--token-auth-file=" + c.tokenFile,
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.files.saPub,
		"--service-account-signing-key-file=" + c.files.saKey,
		"--service-cluster-ip-range=" + ServiceIPRange,
		// Aggregation layer: the aggregator authenticates to aggregated
		// servers with the front-proxy client certificate and forwards the
		// caller's identity in these headers.
		"--requestheader-client-ca-file=" + c.files.frontProxyCA,
		"--requestheader-allowed-names=" + FrontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + c.files.proxyClientCert,
		"--proxy-client-key-file=" + c.files.proxyClKey,
		// Dial an APIService's Service at its ClusterIP, which a test can
		// bind, rather than at its endpoints, which validation keeps off
		// loopback.
		"--enable-aggregator-routing=false",
		// No kubelet or network reaches this apiserver, so it does not
		// publish its own address in the kubernetes Service's endpoints.
		"--endpoint-reconciler-type=none",
	}
	return append(flags, c.extraFlags...)
}

// startAPIServer starts the kube-apiserver on a free loopback port and
// returns once the process runs; it does not wait for it to serve.
func startAPIServer(c apiServerConfig) (*apiServerProcess, error) {
	port, err := freePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	return runAPIServer(c, port, os.O_TRUNC)
}

// runAPIServer starts the kube-apiserver on port. logMode is os.O_TRUNC for
// a first start and os.O_APPEND for a restart (see restart.go), which keeps
// the log of the run before it.
func runAPIServer(c apiServerConfig, port, logMode int) (*apiServerProcess, error) {
	logPath := filepath.Join(c.dir, "kube-apiserver.log")
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|logMode, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open kube-apiserver log: %w", err)
	}
	fmt.Fprintf(logFile, "=== kube-apiserver on 127.0.0.1:%d\n", port)

	cmd := exec.Command(c.binary, c.flags(port)...)
	cmd.Dir = c.dir
	cmd.Env = childEnv()
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = testbin.ChildSysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start kube-apiserver %s: %w", c.binary, err)
	}
	p := &apiServerProcess{cmd: cmd, port: port, logPath: logPath, logFile: logFile, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// childEnv is the test's environment without proxy settings: the
// aggregator's transport honours them, and a proxy must never see the
// loopback traffic between the apiserver and an aggregated server.
func childEnv() []string {
	env := os.Environ()
	out := env[:0:0]
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(name) {
		case "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY":
			continue
		}
		out = append(out, kv)
	}
	return out
}

// waitReady polls /readyz until it answers ok, the process exits or ctx
// ends.
func (p *apiServerProcess) waitReady(ctx context.Context, caPEM []byte, token string) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return errors.New("serving CA has no certificate")
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	defer transport.CloseIdleConnections()
	client := &http.Client{Transport: transport, Timeout: 5 * time.Second}
	url := fmt.Sprintf("https://127.0.0.1:%d/readyz", p.port)

	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	last := "no answer yet"
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		req.Header.Set("Authorization", "Bearer "+token)
		if resp, err := client.Do(req); err != nil {
			last = err.Error()
		} else {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = fmt.Sprintf("%s: %s", resp.Status, failedChecks(body))
		}
		select {
		case <-p.exited:
			return fmt.Errorf("kube-apiserver exited before it was ready: %v", p.waitErr)
		case <-ctx.Done():
			return fmt.Errorf("kube-apiserver not ready (last /readyz: %s): %w", last, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// failedChecks keeps the lines of a /readyz reply that name failing checks,
// which is all a timeout message needs.
func failedChecks(body []byte) string {
	var failed []string
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "[-]") {
			failed = append(failed, strings.TrimPrefix(line, "[-]"))
		}
	}
	if len(failed) == 0 {
		return strings.TrimSpace(string(body))
	}
	return strings.Join(failed, "; ")
}

// portInUse reports whether the process died because its port was taken
// between freePort and the process binding it.
func (p *apiServerProcess) portInUse() bool {
	select {
	case <-p.exited:
	default:
		return false
	}
	b, err := os.ReadFile(p.logPath)
	return err == nil && strings.Contains(string(b), "address already in use")
}

// stop sends SIGTERM, kills the process if it has not exited within
// stopGrace, and waits until it is reaped.
func (p *apiServerProcess) stop() error {
	defer p.logFile.Close()
	select {
	case <-p.exited:
		return nil
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return nil
	case <-time.After(stopGrace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	return fmt.Errorf("kube-apiserver ignored SIGTERM for %v and was killed", stopGrace)
}

// freePort returns a TCP port on host that was free a moment ago. The
// kube-apiserver cannot take port 0, so the port has to be chosen in
// advance; a start that loses the race is retried on a new port.
//
// It cannot be handed a bound socket instead, as the e2e servers are
// (src/serve's socket activation): it runs as a child process, and
// upstream's command builds its SecureServingOptions inside
// app.NewAPIServerCommand, out of reach of the Listener field that would
// take one, so cmd/kube-apiserver would have to copy the command to set
// it. etcd, which runs in this process, binds port 0 itself and has no
// such window; a restart of either on its old port retries the same way
// (restart.go).
func freePort(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", host, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
