// Package faults_test breaks real processes under load and measures what
// the fronts do: sandboxd-sim node processes that form one mesh through
// gossip (--join), SIGKILLed, SIGSTOPped and cut off the network (a
// faultlink.Link) while sandbox-e2b takes creates and relays traffic. Each test
// checks that every sandbox a client was told about is reachable (or, on
// a node that died, honestly gone), that nothing nobody was told about
// stays claimed, that errors stay inside the measured window, and that the
// front holds no more file descriptors and goroutines afterwards; it logs
// the figures docs/reliability.md records.
package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/faultlink"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	domain   = "sandbox.faults.test"
	image    = "faultimg"
	echoPort = 8080
	// warmPerNode is each node's pool: enough that no create in a test
	// waits for a refill.
	warmPerNode = 24
	// gossipEvery and meshRefresh keep failure detection quick; a dead
	// member leaves its peers' view after three gossip rounds.
	gossipEvery = 250 * time.Millisecond
	meshRefresh = 250 * time.Millisecond
	// nodeTimeout bounds one call of the front to one node: the longest a
	// hung node can hold a request before the front moves on.
	nodeTimeout = 2 * time.Second
	// clientTimeout bounds every request the tests make.
	clientTimeout = 15 * time.Second
	// createEvery paces each create worker: a steady load the warm pools
	// (refilled at once) keep up with.
	createEvery = 100 * time.Millisecond
)

// stack is three sandboxd-sim processes (one node each, joined through the
// first) and sandbox-e2b seeded with the first node only.
type stack struct {
	token, key          string
	nodes               []*harness.Sim
	front               *testbin.Process
	api, proxy, metrics string
	http                *http.Client
	// link is the network path to nodes[linked] in a stack started with
	// startLinkedStack, nil otherwise.
	link *faultlink.Link
	// direct are the nodes' own addresses, for the test's checks: they
	// reach a node whatever happens to its link.
	direct []string
}

// linked is the node a linked stack puts behind a faultlink.Link.
const linked = 1

// startStack starts the stack with every node reached directly.
func startStack(t *testing.T) *stack { return newStack(t, false) }

// startLinkedStack starts the stack with nodes[linked] reached, by the
// front and by its peers, only through a faultlink.Link: it binds
// 127.0.0.1:P and advertises 127.0.0.2:P, where the link listens.
func startLinkedStack(t *testing.T) *stack { return newStack(t, true) }

func newStack(t *testing.T, withLink bool) *stack {
	t.Helper()
	simBin := testbin.Path(t, "SANDBOXD_SIM", "github.com/cocoonstack/sandbox-operator/src/cmd/sandboxd-sim")
	e2bBin := testbin.Path(t, "SANDBOX_E2B", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-e2b")
	dir := t.TempDir()
	s := &stack{
		token: harness.RandomHex(t), key: "e2b_" + harness.RandomHex(t),
		http: &http.Client{Timeout: clientTimeout},
	}
	secret := harness.RandomHex(t)
	tokenFile := harness.WriteFile(t, dir, "sandboxd-token", s.token+"\n")
	secretFile := harness.WriteFile(t, dir, "envd-secret", secret+"\n")
	keyFile := harness.WriteFile(t, dir, "e2b-keys", s.key+"\n")
	for i, name := range []string{"a", "b", "c"} {
		ndir := filepath.Join(dir, name)
		if err := os.Mkdir(ndir, 0o700); err != nil {
			t.Fatal(err)
		}
		args := []string{
			"--nodes=1", "--name-prefix=" + name + "-", "--api-token-file=" + tokenFile,
			"--pools=" + image + ":none:small=" + strconv.Itoa(warmPerNode),
			"--envd-secret-file=" + secretFile, "--echo-ports=" + strconv.Itoa(echoPort), "--unisolated",
			"--gossip-interval=" + gossipEvery.String(), "--log-level=debug",
		}
		if i > 0 {
			args = append(args, "--join="+s.nodes[0].Addrs()[0])
		}
		if withLink && i == linked {
			// The node picks its own port P on 127.0.0.1 and advertises
			// 127.0.0.2:P, where the link then listens: no port is chosen
			// here and bound later by another process.
			args = append(args, "--advertise-host=127.0.0.2")
		}
		s.nodes = append(s.nodes, harness.StartSim(t, simBin, ndir, 1, args...))
		direct := s.nodes[i].Addrs()[0]
		if withLink && i == linked {
			_, port, err := net.SplitHostPort(direct)
			if err != nil {
				t.Fatalf("sandboxd-sim advertised %q: %v", direct, err)
			}
			s.link = harness.StartLink(t, direct, net.JoinHostPort("127.0.0.1", port))
			direct = net.JoinHostPort("127.0.0.1", port)
		}
		s.direct = append(s.direct, direct)
	}
	apiListener, api := harness.Listen(t)
	proxyListener, proxy := harness.Listen(t)
	metricsListener, metrics := harness.Listen(t)
	s.api, s.proxy, s.metrics = api, proxy, metrics
	s.front = harness.StartProcess(t, "sandbox-e2b", e2bBin, dir, []string{
		"--sandboxd=" + s.nodes[0].Addrs()[0],
		"--sandboxd-token-file=" + tokenFile,
		"--mesh-refresh-interval=" + meshRefresh.String(),
		"--mesh-node-timeout=" + nodeTimeout.String(),
		"--e2b-bind-address=" + s.api,
		"--envd-proxy-bind-address=" + s.proxy,
		"--e2b-domain=" + domain,
		"--e2b-envd-secret-file=" + secretFile,
		"--e2b-api-key-file=" + keyFile,
		// The load is one key's; the per-key create rate is not under test.
		"--e2b-create-rate=0", "--e2b-max-sandboxes=0",
		"--metrics-bind-address=" + s.metrics,
	}, nil, apiListener, proxyListener, metricsListener)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	harness.WaitHealthy(t, ctx, s.front, "http://"+s.api+"/health")
	// Every node gossips with the other two before the test begins, and the
	// front sees all three.
	for _, addr := range s.direct {
		s.waitPeers(t, addr, 2)
	}
	return s
}

// addrs are the three nodes' API addresses.
func (s *stack) addrs() []string {
	var out []string
	for _, n := range s.nodes {
		out = append(out, n.Addrs()[0])
	}
	return out
}

// waitPeers waits until the node at addr lists want peers.
func (s *stack) waitPeers(t *testing.T, addr string, want int) time.Duration {
	t.Helper()
	start := time.Now()
	c := s.node(t, addr)
	ctx, cancel := context.WithTimeout(context.Background(), poll.Timeout)
	defer cancel()
	poll.UntilNil(t, fmt.Sprintf("node %s to list %d peers", addr, want), func() error {
		got, err := c.Peers(ctx)
		if err != nil {
			return err
		}
		if len(got) != want {
			return fmt.Errorf("it lists peers %v", got)
		}
		return nil
	})
	return time.Since(start)
}

func (s *stack) node(t *testing.T, addr string) *sandboxd.Client {
	c, err := sandboxd.New(addr, sandboxd.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// created is what the front told a client about one sandbox.
type created struct {
	ID, AccessToken string
}

// outcome is one create as the client saw it.
type outcome struct {
	start, end time.Time
	status     int
	sb         created
	err        error
}

// create asks the front for one sandbox of the pooled image.
func (s *stack) create(ctx context.Context) (o outcome) {
	o.start = time.Now()
	defer func() { o.end = time.Now() }()
	body := `{"templateID":"` + image + `","allow_internet_access":false,"timeout":600}`
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+s.api+"/sandboxes", strings.NewReader(body))
	if err != nil {
		o.err = err
		return o
	}
	req.Header.Set("X-API-KEY", s.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := s.http.Do(req)
	if err != nil {
		o.err = err
		return o
	}
	defer resp.Body.Close()
	o.status = resp.StatusCode
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode == http.StatusCreated {
		var out struct {
			SandboxID       string `json:"sandboxID"`
			EnvdAccessToken string `json:"envdAccessToken"`
		}
		if err := json.Unmarshal(raw, &out); err != nil {
			o.err = fmt.Errorf("create answer: %w", err)
		}
		o.sb = created{ID: out.SandboxID, AccessToken: out.EnvdAccessToken}
	} else {
		o.err = fmt.Errorf("create: %d %s", resp.StatusCode, bytes.TrimSpace(raw))
	}
	return o
}

// createLoad is a steady create load on the front: workers that each
// create a sandbox every createEvery until the context ends.
type createLoad struct {
	wg sync.WaitGroup
	mu sync.Mutex
	// all are the outcomes so far; inFlight the start of each worker's
	// create under way.
	all      []outcome
	inFlight map[int]time.Time
}

// createLoad starts workers creating until ctx ends.
func (s *stack) createLoad(ctx context.Context, workers int) *createLoad {
	l := &createLoad{inFlight: map[int]time.Time{}}
	for w := range workers {
		l.wg.Go(func() {
			tick := time.NewTicker(createEvery)
			defer tick.Stop()
			for ctx.Err() == nil {
				l.mu.Lock()
				l.inFlight[w] = time.Now()
				l.mu.Unlock()
				o := s.create(context.Background())
				l.mu.Lock()
				delete(l.inFlight, w)
				l.all = append(l.all, o)
				l.mu.Unlock()
				select {
				case <-ctx.Done():
				case <-tick.C:
				}
			}
		})
	}
	return l
}

// collect waits for the workers, once the load's context ended, and
// returns every outcome.
func (l *createLoad) collect() []outcome {
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.all
}

// waitSucceeded waits until n creates that started after since have
// succeeded: the load went on past that moment, whatever it was.
func (l *createLoad) waitSucceeded(t *testing.T, n int, since time.Time, what string) {
	t.Helper()
	poll.UntilNil(t, fmt.Sprintf("%d creates started after %s to succeed", n, what), func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		ok, failed := 0, 0
		for _, o := range l.all {
			if o.start.After(since) {
				if o.err == nil {
					ok++
				} else {
					failed++
				}
			}
		}
		if ok < n {
			return fmt.Errorf("%d succeeded, %d failed so far", ok, failed)
		}
		return nil
	})
}

// waitEnded waits until every create that started before at has ended.
func (l *createLoad) waitEnded(t *testing.T, at time.Time, what string) {
	t.Helper()
	poll.UntilNil(t, "the creates under way at "+what+" to end", func() error {
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, started := range l.inFlight {
			if started.Before(at) {
				return fmt.Errorf("a create started %v before it still waits", at.Sub(started).Round(time.Millisecond))
			}
		}
		return nil
	})
}

// get answers the status of GET /sandboxes/{id}.
func (s *stack) get(t *testing.T, id string) int {
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.api+"/sandboxes/"+id, nil)
	req.Header.Set("X-API-KEY", s.key)
	resp, err := s.http.Do(req)
	if err != nil {
		t.Errorf("get %s: %v", id, err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// kill deletes a sandbox through the front (404 is fine: already gone).
func (s *stack) kill(id string) error {
	req, _ := http.NewRequest(http.MethodDelete, "http://"+s.api+"/sandboxes/"+id, nil)
	req.Header.Set("X-API-KEY", s.key)
	resp, err := s.http.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusNotFound {
		return fmt.Errorf("delete %s: %d", id, resp.StatusCode)
	}
	return nil
}

// echo sends one request through the data plane to the sandbox's echo
// guest on client c and checks the guest that answered is that sandbox.
func (s *stack) echo(c *http.Client, sb created) error {
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.proxy+"/ping", nil)
	req.Host = strconv.Itoa(echoPort) + "-" + sb.ID + "." + domain
	req.Header.Set("X-Access-Token", sb.AccessToken)
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("echo of %s: %d %s", sb.ID, resp.StatusCode, bytes.TrimSpace(raw))
	}
	var got struct {
		Sandbox string `json:"sandbox"`
	}
	if err := json.Unmarshal(raw, &got); err != nil || !sandbox.SameID(got.Sandbox, sb.ID) {
		return fmt.Errorf("echo of %s answered for %q (%v)", sb.ID, got.Sandbox, err)
	}
	return nil
}

// owners maps the sandboxes claimed on the reachable nodes to their node.
func (s *stack) owners(t *testing.T, addrs []string) map[string]string {
	out := map[string]string{}
	for _, addr := range addrs {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		list, err := s.node(t, addr).Sandboxes(ctx, "")
		cancel()
		if err != nil {
			t.Fatalf("list node %s: %v", addr, err)
		}
		for _, sb := range list {
			out[sb.ID] = addr
		}
	}
	return out
}

// ownerOf finds id among owners, whatever its spelling.
func ownerOf(owners map[string]string, id string) (string, bool) {
	for sid, addr := range owners {
		if sandbox.SameID(sid, id) {
			return addr, true
		}
	}
	return "", false
}

// checkReleased waits until the nodes at addrs claim exactly the sandboxes
// in told: a claim nobody was told about must have been released.
func (s *stack) checkReleased(t *testing.T, addrs []string, told []created) {
	t.Helper()
	poll.UntilNil(t, "the nodes to release every claim nobody was told about", func() error {
		var extra []string
		for id, addr := range s.owners(t, addrs) {
			if !slices.ContainsFunc(told, func(c created) bool { return sandbox.SameID(c.ID, id) }) {
				extra = append(extra, addr+": "+id)
			}
		}
		if len(extra) > 0 {
			return fmt.Errorf("claimed with nobody told about them: %v", extra)
		}
		return nil
	})
}

// usage is what the front holds: open file descriptors and goroutines.
type usage struct{ fds, goroutines int }

// usage reads the front's descriptors from /proc and its goroutines from
// its metrics listener.
func (s *stack) usage(t *testing.T) usage {
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(s.front.Pid()) + "/fd")
	if err != nil {
		t.Fatalf("read the front's fds: %v", err)
	}
	resp, err := s.http.Get("http://" + s.metrics + "/metrics")
	if err != nil {
		t.Fatalf("read the front's metrics: %v", err)
	}
	defer resp.Body.Close()
	n, err := testbin.Goroutines(resp.Body)
	if err != nil {
		t.Fatalf("the front's metrics (%s): %v", resp.Status, err)
	}
	return usage{fds: len(ents), goroutines: n}
}

// checkNoGrowth deletes every sandbox in told, lets idle connections
// close, and compares the front's descriptors and goroutines with before.
func (s *stack) checkNoGrowth(t *testing.T, before usage, told []created) {
	t.Helper()
	for _, sb := range told {
		if err := s.kill(sb.ID); err != nil {
			t.Error(err)
		}
	}
	s.http.CloseIdleConnections()
	// Idle keep-alive connections to the nodes close on their own, after
	// longer than a test waits; allow the handful the front keeps per
	// node, two goroutines (read and write loop) for each descriptor still
	// open, and a few for the runtime's timers and the scrape itself. A
	// goroutine leak is growth past that.
	const fdSlack, goroutineSlack = 12, 10
	var after usage
	var allowed int
	poll.UntilNil(t, "the front's descriptors and goroutines to come back down", func() error {
		s.http.CloseIdleConnections()
		after = s.usage(t)
		allowed = before.goroutines + 2*max(after.fds-before.fds, 0) + goroutineSlack
		if after.fds > before.fds+fdSlack || after.goroutines > allowed {
			return fmt.Errorf("the front grew: file descriptors %d to %d (at most %d), goroutines %d to %d (at most %d)",
				before.fds, after.fds, before.fds+fdSlack, before.goroutines, after.goroutines, allowed)
		}
		return nil
	})
	t.Logf("front file descriptors: %d before, %d after; goroutines: %d before, %d after",
		before.fds, after.fds, before.goroutines, after.goroutines)
}

// percentile is the p-th percentile of ds (0 < p ≤ 100).
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	ds = slices.Clone(ds)
	slices.Sort(ds)
	i := int(float64(len(ds))*p/100+0.5) - 1
	return ds[min(max(i, 0), len(ds)-1)]
}
