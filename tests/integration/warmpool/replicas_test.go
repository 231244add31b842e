package warmpool_test

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
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/warmpool"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	apiserverBinaryEnv = "SANDBOX_APISERVER"
	apiserverBinaryPkg = "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver"

	// apiPollEvery is how often the survivor's API is probed during the
	// failover.
	apiPollEvery = 200 * time.Millisecond
	// replicaStopGrace is how long a replica gets to stop after SIGTERM.
	replicaStopGrace = 20 * time.Second
)

// TestReplicasFailover runs two sandbox-apiserver processes with the
// warm-pool driver enabled and the binary's default election timings:
// exactly one of them holds the Lease and drives the pools; once it is
// SIGKILLed (so it cannot release the Lease) the other takes the Lease
// over within the lease duration and drives, while its own aggregated
// API keeps answering throughout.
func TestReplicasFailover(t *testing.T) {
	e := startEnv(t)
	ns := e.namespace(t, "replicas")
	f := e.startFleet(t, "r-", 3, token)
	adminToken := e.c.AdminConfig().BearerToken
	replicas := startReplicaPair(t, e, ns)
	if replicas[0].id == replicas[1].id {
		t.Fatalf("both replicas hold the lease identity %q", replicas[0].id)
	}

	key := keyOf("ubuntu:24.04")
	e.apply(t, ns, "base", key.Template, 7)
	eventually(t, "7 replicas over 3 nodes", func() (bool, string) { return placedAsExpected(key, 7, f) })

	// Exactly one replica drives: the Lease names one of the two, and
	// keeps naming it over several retry periods.
	var leader, survivor *replica
	eventually(t, "the lease names a replica", func() (bool, string) {
		h := leaseHolder(e, ns)
		for i, r := range replicas {
			if h == r.id {
				leader, survivor = r, replicas[1-i]
				return true, ""
			}
		}
		return false, fmt.Sprintf("holder %q, replicas %q and %q", h, replicas[0].id, replicas[1].id)
	})
	t.Logf("%s leads (%s); %s follows (%s)", leader.name, leader.id, survivor.name, survivor.id)
	waitRenewals(t, e, ns, leader.id, 3)

	// Probe the survivor's own API for the whole failover.
	probeCtx, stopProbe := context.WithCancel(context.Background())
	var probes, failures int
	var failed []string
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(apiPollEvery)
		defer tick.Stop()
		for {
			for _, path := range []string{"/readyz", "/apis/agents.x-k8s.io/v1beta1", "/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxes"} {
				probes++
				if err := survivor.get(path, adminToken); err != nil {
					failures++
					if len(failed) < 10 {
						failed = append(failed, fmt.Sprintf("%s: %v", path, err))
					}
				}
			}
			select {
			case <-probeCtx.Done():
				return
			case <-tick.C:
			}
		}
	})
	stopProbing := sync.OnceFunc(func() { stopProbe(); wg.Wait() })
	t.Cleanup(stopProbing)

	killed := time.Now()
	if err := leader.Kill(); err != nil {
		t.Fatal(err)
	}
	e.scale(t, ns, "base", 11)

	eventually(t, "the lease names the survivor", func() (bool, string) {
		h := leaseHolder(e, ns)
		return h == survivor.id, "holder " + h
	})
	took := time.Since(killed)
	eventually(t, "the survivor drives the scale made after the kill", func() (bool, string) { return placedAsExpected(key, 11, f) })
	drove := time.Since(killed)
	stopProbing()

	t.Logf("takeover %v, scale placed %v after the kill (lease duration %v, retry period %v); %d API probes on the survivor, %d failed",
		took.Round(time.Millisecond), drove.Round(time.Millisecond), warmpool.DefaultLeaseDuration, warmpool.DefaultRetryPeriod, probes, failures)
	// The follower sees the leader's last renewal up to one jittered retry
	// period (1.2×) late and tries again up to one more after the lease
	// expired: about 19.8 s with the defaults. Four retry periods leave
	// room for a loaded machine's request latency.
	if limit := warmpool.DefaultLeaseDuration + 4*warmpool.DefaultRetryPeriod; took > limit {
		t.Errorf("takeover took %v, beyond the lease duration plus four retry periods (%v)", took, limit)
	}
	if failures > 0 {
		t.Errorf("the survivor's API failed %d of %d probes during the failover: %s", failures, probes, strings.Join(failed, "; "))
	}
	if probes == 0 {
		t.Error("the survivor's API was never probed")
	}
	if err := survivor.ExitErr(); err != nil {
		t.Errorf("the survivor died: %v", err)
	}
}

// replica is one sandbox-apiserver process on its own loopback port.
type replica struct {
	*testbin.Process
	name    string
	addr    string
	logPath string
	client  *http.Client
	id      string // its holder identity in the Lease
}

func startReplica(t *testing.T, binary, dir, leaseNamespace, kubeconfig, tokenFile string, extraArgs ...string) *replica {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	port, err := freeLoopbackPort()
	if err != nil {
		t.Fatal(err)
	}
	certDir := filepath.Join(dir, "certs")
	r := &replica{
		name:    filepath.Base(dir),
		addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		logPath: filepath.Join(dir, "sandbox-apiserver.log"),
	}
	r.Process, err = testbin.StartProcess(r.name, binary, r.logPath, append([]string{
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + certDir,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--sandboxd-token-file=" + tokenFile,
		"--enable-warm-pool-driver=true",
		"--warm-pool-sync-interval=1s",
		// The test fleet publishes every second, so a 20 s hold outlasts
		// a publish many times over; the default minute is sized for
		// vk-sandbox's 30 s, and would only make the burst test wait.
		"--name-hold-ttl=20s",
	}, extraArgs...), []string{"OPERATOR_LOG_LEVEL=info", warmpool.NamespaceEnv + "=" + leaseNamespace})
	if err != nil {
		t.Fatal(err)
	}
	transport := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12}}
	r.client = &http.Client{Transport: transport, Timeout: 10 * time.Second}
	t.Cleanup(func() {
		r.stop()
		transport.CloseIdleConnections()
		if t.Failed() {
			t.Log(r.logTail())
		}
	})
	return r
}

// freeLoopbackPort is a port nothing listens on right now.
func freeLoopbackPort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// get requests path, verifying the self-signed serving certificate the
// replica wrote to its cert dir, and fails unless the answer is 200.
func (r *replica) get(path, bearer string) error {
	if r.client.Transport.(*http.Transport).TLSClientConfig.RootCAs == nil {
		pemData, err := os.ReadFile(filepath.Join(filepath.Dir(r.logPath), "certs", "apiserver.crt"))
		if err != nil {
			return fmt.Errorf("serving certificate not written yet: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pemData) {
			return errors.New("serving certificate file holds no certificate")
		}
		r.client.Transport.(*http.Transport).TLSClientConfig.RootCAs = pool
	}
	req, err := http.NewRequest(http.MethodGet, "https://"+r.addr+path, nil)
	if err != nil {
		return err
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// identityLine finds the holder identity the binary logs when it builds
// its driver (hostname_uuid, so two replicas on one host differ).
var identityLine = regexp.MustCompile(`msg="warm-pool driver enabled".* identity=(\S+)`)

func (r *replica) identity() (string, error) {
	data, err := os.ReadFile(r.logPath)
	if err != nil {
		return "", err
	}
	m := identityLine.FindSubmatch(data)
	if m == nil {
		return "", fmt.Errorf("%s has not logged its identity", r.name)
	}
	return strings.Trim(string(m[1]), `"`), nil
}

// stop stops the replica unless it already exited (the failover test
// kills one on purpose).
func (r *replica) stop() {
	if r.ExitErr() == nil {
		_ = r.Stop(replicaStopGrace)
	}
}

// logTailLines is how much of a replica's log a failure shows.
const logTailLines = 60

func (r *replica) logTail() string { return r.LogTail(logTailLines) }
