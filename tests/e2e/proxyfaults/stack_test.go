// Package proxyfaults_test breaks sandbox-envd-proxy replicas under load
// and measures what their clients see: two replicas read the same
// NodeInventory (published by sandboxd-sim nodes to a real
// kube-apiserver) and carry bulk envd file transfers to the simulated
// guests; one is SIGKILLed mid-transfer. Each test checks that the
// surviving replica's transfers complete with the right bytes, that the
// dead replica's transfers fail as broken connections instead of hanging,
// that a retry through the survivor leaves exactly the retried content,
// that the survivor holds no more file descriptors afterwards and that
// nothing stays claimed; it logs the figures docs/reliability.md's fault
// table needs.
package proxyfaults_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/e2e/harness"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	domain = "sandbox.proxyfaults.test"
	image  = "bulkimg"
	// envdPort is the guest port envd's file API is served on.
	envdPort = 49983
	// nodes is the sandboxd-sim fleet size; one sandbox is claimed on
	// each, so both replicas relay to more than one node.
	nodes = 2
	// setupTimeout bounds the cluster, the nodes and the replicas coming
	// up; it is a deadline for a broken start, not an expectation.
	setupTimeout = 2 * time.Minute
	// callTimeout bounds every short request (health, claim, release).
	callTimeout = 15 * time.Second
	// publishEvery keeps a new claim's way into NodeInventory short.
	publishEvery = 500 * time.Millisecond
	// copyBuffer is the size of the client's reads and writes; the proxy
	// copies in 256 KiB as well.
	copyBuffer = 256 << 10
)

// stack is a kube-apiserver, a sandboxd-sim process whose nodes publish
// NodeInventory to it and serve envd guests, and two sandbox-envd-proxy
// replicas reading that inventory, with one claimed sandbox per node.
type stack struct {
	token   string
	sim     *harness.Sim
	proxies [2]*harness.EnvdProxy
	// metrics are the replicas' metrics listeners (go_goroutines).
	metrics [2]string
	// clients are one HTTP/1.1 client per replica, so that closing one's
	// idle connections leaves the other's alone.
	clients   [2]*http.Client
	sandboxes []claimed
}

// claimed is one sandbox as its claimer knows it.
type claimed struct {
	// ID is sandboxd's id, Node the API address of the node that owns it.
	ID, Node string
	// AccessToken is envd's X-Access-Token, derived from the claim token
	// as the e2b surface derives it for the SDK.
	AccessToken string
}

func startStack(t *testing.T) *stack {
	t.Helper()
	simBin := testbin.Path(t, "SANDBOXD_SIM", "github.com/cocoonstack/sandbox-operator/src/cmd/sandboxd-sim")
	proxyBin := testbin.Path(t, "SANDBOX_ENVD_PROXY", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-envd-proxy")
	harness.LocateKubeAPIServer(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	c := harness.StartCluster(t, ctx, dir)

	s := &stack{token: harness.RandomHex(t)}
	secret := harness.RandomHex(t)
	tokenFile := harness.WriteFile(t, dir, "sandboxd-token", s.token+"\n")
	secretFile := harness.WriteFile(t, dir, "envd-secret", secret+"\n")
	scratch := filepath.Join(dir, "scratch")
	if err := os.Mkdir(scratch, 0o700); err != nil {
		t.Fatal(err)
	}
	s.sim = harness.StartSim(t, simBin, dir, nodes,
		"--nodes="+strconv.Itoa(nodes), "--name-prefix=bulk-", "--api-token-file="+tokenFile,
		"--pools="+image+":none:small=2", "--envd-secret-file="+secretFile, "--echo-ports=",
		"--unisolated", "--scratch-dir="+scratch,
		"--kubeconfig="+c.Kubeconfig(), "--publish-interval="+publishEvery.String())
	for i, name := range []string{"envd-proxy-a", "envd-proxy-b"} {
		s.proxies[i] = harness.StartEnvdProxy(t, ctx, harness.EnvdProxyConfig{
			Binary: proxyBin, Name: name, Dir: dir, Kubeconfig: c.Kubeconfig(), Domain: domain,
			TokenFile: tokenFile, EnvdSecretFile: secretFile, Metrics: true,
		})
		s.metrics[i] = s.proxies[i].MetricsAddr
		s.clients[i] = newClient()
	}
	t.Cleanup(func() {
		for _, cl := range s.clients {
			cl.CloseIdleConnections()
		}
	})
	harness.WaitInventory(t, ctx, c, s.sim.Names(), 1)

	// Releasing runs before the nodes stop (cleanups run last first), and
	// CheckNoClaims then proves nothing this test claimed outlived it.
	t.Cleanup(func() {
		s.releaseAll(t)
		harness.CheckNoClaims(t, s.token, s.sim.Addrs())
	})
	for _, addr := range s.sim.Addrs() {
		s.sandboxes = append(s.sandboxes, s.claim(t, ctx, addr, []byte(secret)))
	}
	s.waitListed(t, ctx, c)
	// Each replica places each sandbox from its own informer; both must
	// relay to every sandbox before the fault begins.
	for p := range s.proxies {
		for _, sb := range s.sandboxes {
			s.waitAnswers(t, ctx, p, sb)
		}
	}
	return s
}

// newClient is an HTTP/1.1 client that opens one connection per
// concurrent transfer (so a replica's death breaks each transfer's own
// connection) and copies in large buffers.
func newClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:               nil,
		DisableCompression:  true,
		MaxIdleConnsPerHost: 16,
		WriteBufferSize:     copyBuffer,
		ReadBufferSize:      copyBuffer,
	}}
}

// claim takes one sandbox of the pool on the node at addr, with the root
// token, as sandbox-apiserver's e2b surface does for a create.
func (s *stack) claim(t *testing.T, ctx context.Context, addr string, secret []byte) claimed {
	t.Helper()
	c := s.node(t, addr)
	callCtx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cl, err := c.Claim(callCtx, sandboxd.ClaimRequest{Template: image, Net: "none", Size: "small", TTLSeconds: 600, NoRedirect: true})
	if err != nil {
		t.Fatalf("claim on %s: %v", addr, err)
	}
	return claimed{ID: cl.ID, Node: addr, AccessToken: envdtoken.Derive(secret, cl.Token)}
}

func (s *stack) node(t *testing.T, addr string) *sandboxd.Client {
	t.Helper()
	c, err := sandboxd.New(addr, sandboxd.WithToken(s.token))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// releaseAll releases every sandbox this test claimed; one already gone
// is fine.
func (s *stack) releaseAll(t *testing.T) {
	for _, sb := range s.sandboxes {
		ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
		err := s.node(t, sb.Node).Release(ctx, sb.ID)
		cancel()
		if err != nil && !errors.Is(err, sandboxd.ErrNotFound) {
			t.Errorf("release %s: %v", sb.ID, err)
		}
	}
}

// waitListed waits until every claimed sandbox is an entry of its node's
// NodeInventory, so the replicas place it from the inventory rather than
// by asking every node.
func (s *stack) waitListed(t *testing.T, ctx context.Context, c *cluster.Cluster) {
	t.Helper()
	api := c.Dynamic().Resource(v1beta1.NodeInventoryGVR)
	poll.UntilNil(t, "the claimed sandboxes to appear in NodeInventory", func() error {
		var listed []string
		for _, name := range s.sim.Names() {
			u, err := api.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return fmt.Errorf("get %s's NodeInventory: %w", name, err)
			}
			entries, _ := u.Object["entries"].([]any)
			for _, e := range entries {
				em, _ := e.(map[string]any)
				if id, _ := em["id"].(string); id != "" {
					listed = append(listed, id)
				}
			}
		}
		for _, sb := range s.sandboxes {
			if !slices.ContainsFunc(listed, func(id string) bool { return sandbox.SameID(id, sb.ID) }) {
				return fmt.Errorf("%s not listed (listed %v)", sb.ID, listed)
			}
		}
		return nil
	})
}

// waitAnswers waits until replica p relays an authorized envd request to
// sb: GET /health answers 204 from the guest.
func (s *stack) waitAnswers(t *testing.T, ctx context.Context, p int, sb claimed) {
	t.Helper()
	poll.UntilNil(t, fmt.Sprintf("replica %d to relay to %s", p, sb.ID), func() error { return s.health(ctx, p, sb) })
}

// health asks sb's envd for GET /health through replica p.
func (s *stack) health(ctx context.Context, p int, sb claimed) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	req, err := s.request(ctx, p, sb, http.MethodGet, "/health", nil)
	if err != nil {
		return err
	}
	resp, err := s.clients[p].Do(req)
	if err != nil {
		return fmt.Errorf("health of %s through replica %d: %w", sb.ID, p, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusNoContent {
		return &statusError{what: "health of " + sb.ID, code: resp.StatusCode, body: raw}
	}
	return nil
}

// request addresses sb's envd through replica p by the {port}-{id}.{domain}
// host, with the access token, as the e2b SDK does.
func (s *stack) request(ctx context.Context, p int, sb claimed, method, pathAndQuery string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+s.proxies[p].Addr+pathAndQuery, body)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, pathAndQuery, err)
	}
	host, ok := sandbox.DNSID(sb.ID)
	if !ok {
		return nil, fmt.Errorf("sandbox id %q has no DNS spelling", sb.ID)
	}
	req.Host = strconv.Itoa(envdPort) + "-" + host + "." + domain
	req.Header.Set("X-Access-Token", sb.AccessToken)
	return req, nil
}

// filesPath is envd's file endpoint for a guest path (relative paths
// resolve under the default user's home).
func filesPath(guestPath string) string {
	return "/files?path=" + url.QueryEscape(guestPath)
}

// statusError is an HTTP answer other than the one wanted: the server
// answered, so the connection did not break.
type statusError struct {
	what string
	code int
	body []byte
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s: %d %s", e.what, e.code, bytes.TrimSpace(e.body))
}

// content is a file's bytes as a seeded stream (ChaCha8), so a transfer
// of any size costs no memory and anyone with the seed can tell whether
// a byte is right.
type content struct {
	seed uint64
	size int64
}

// digest is what a transfer is checked by: the bytes' length and SHA-256.
type digest struct {
	size int64
	sum  [sha256.Size]byte
}

func (d digest) String() string { return fmt.Sprintf("%d bytes sha256 %x", d.size, d.sum[:6]) }

func (c content) rng() *rand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], c.seed)
	return rand.NewChaCha8(key)
}

// hold pauses a transfer once at byte offset at: it reports that it got
// there and waits for release. It lets the test kill a replica while every
// transfer is provably mid-way, whatever the machine's speed.
type hold struct {
	at      int64
	once    sync.Once
	reached func()
	release <-chan struct{}
	// passed is read and written by the one goroutine moving the bytes.
	passed bool
}

// arrive reports the hold point reached. A transfer that ends before it
// arrives too, so the test never waits for it in vain.
func (h *hold) arrive() { h.once.Do(h.reached) }

// clip shortens the next read or write of p at offset pos so that it stops
// at the hold point, and there waits for release (or ctx).
func (h *hold) clip(ctx context.Context, pos int64, p []byte) ([]byte, error) {
	if h == nil || h.passed {
		return p, nil
	}
	if pos < h.at {
		if pos+int64(len(p)) > h.at {
			p = p[:h.at-pos]
		}
		return p, nil
	}
	h.arrive()
	select {
	case <-h.release:
	case <-ctx.Done():
		return nil, fmt.Errorf("held at byte %d: %w", pos, ctx.Err())
	}
	h.passed = true
	return p, nil
}

// generator is an upload body: content's bytes, hashed and counted as the
// HTTP client takes them.
type generator struct {
	ctx   context.Context
	rng   *rand.ChaCha8
	left  int64
	sent  int64
	sum   hash.Hash
	moved *atomic.Int64
	hold  *hold
}

func (g *generator) Read(p []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	p, err := g.hold.clip(g.ctx, g.sent, p)
	if err != nil {
		return 0, err
	}
	n := int(min(int64(len(p)), g.left))
	_, _ = g.rng.Read(p[:n])
	g.sum.Write(p[:n])
	g.left -= int64(n)
	g.sent += int64(n)
	g.moved.Add(int64(n))
	return n, nil
}

// upload sends c to guestPath of sb through replica p (a raw
// application/octet-stream POST /files with its Content-Length, as
// envd's API takes it), counting the bytes sent in moved, and returns
// the digest of what it sent in full.
func (s *stack) upload(ctx context.Context, p int, sb claimed, guestPath string, c content, moved *atomic.Int64, h *hold) (digest, error) {
	g := &generator{ctx: ctx, rng: c.rng(), left: c.size, sum: sha256.New(), moved: moved, hold: h}
	req, err := s.request(ctx, p, sb, http.MethodPost, filesPath(guestPath), g)
	if err != nil {
		return digest{}, err
	}
	req.ContentLength = c.size
	req.Header.Set("Content-Type", "application/octet-stream")
	resp, err := s.clients[p].Do(req)
	if err != nil {
		return digest{}, fmt.Errorf("upload %s to %s through replica %d after %d bytes: %w", guestPath, sb.ID, p, g.sent, err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	if resp.StatusCode != http.StatusOK {
		return digest{}, &statusError{what: fmt.Sprintf("upload %s to %s through replica %d", guestPath, sb.ID, p), code: resp.StatusCode, body: raw}
	}
	if g.left != 0 {
		return digest{}, fmt.Errorf("upload %s answered 200 with %d bytes unsent", guestPath, g.left)
	}
	d := digest{size: g.sent}
	copy(d.sum[:], g.sum.Sum(nil))
	return d, nil
}

// download reads guestPath of sb through replica p, counting the bytes
// received in moved, and returns the digest of the whole body; a body cut
// short is an error, never a short digest.
func (s *stack) download(ctx context.Context, p int, sb claimed, guestPath string, moved *atomic.Int64, h *hold) (digest, error) {
	req, err := s.request(ctx, p, sb, http.MethodGet, filesPath(guestPath), nil)
	if err != nil {
		return digest{}, err
	}
	resp, err := s.clients[p].Do(req)
	if err != nil {
		return digest{}, fmt.Errorf("download %s from %s through replica %d: %w", guestPath, sb.ID, p, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
		return digest{}, &statusError{what: fmt.Sprintf("download %s from %s through replica %d", guestPath, sb.ID, p), code: resp.StatusCode, body: raw}
	}
	sum := sha256.New()
	buf := make([]byte, copyBuffer)
	var got int64
	for {
		chunk, err := h.clip(ctx, got, buf)
		if err != nil {
			return digest{}, fmt.Errorf("download %s: %w", guestPath, err)
		}
		n, err := resp.Body.Read(chunk)
		sum.Write(chunk[:n])
		got += int64(n)
		moved.Add(int64(n))
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return digest{}, fmt.Errorf("download %s from %s through replica %d after %d of %d bytes: %w",
				guestPath, sb.ID, p, got, resp.ContentLength, err)
		}
	}
	if resp.ContentLength >= 0 && got != resp.ContentLength {
		return digest{}, fmt.Errorf("download %s: %d bytes, declared %d", guestPath, got, resp.ContentLength)
	}
	d := digest{size: got}
	copy(d.sum[:], sum.Sum(nil))
	return d, nil
}

// fds counts replica p's open file descriptors.
func (s *stack) fds(t *testing.T, p int) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/" + strconv.Itoa(s.proxies[p].Proc.Pid()) + "/fd")
	if err != nil {
		t.Fatalf("read replica %d's fds: %v", p, err)
	}
	return len(ents)
}

// goroutines reads replica p's goroutine count off its metrics listener.
func (s *stack) goroutines(t *testing.T, p int) int {
	t.Helper()
	resp, err := http.Get("http://" + s.metrics[p] + "/metrics")
	if err != nil {
		t.Fatalf("read replica %d's metrics: %v", p, err)
	}
	defer resp.Body.Close()
	n, err := testbin.Goroutines(resp.Body)
	if err != nil {
		t.Fatalf("replica %d's metrics (%s): %v", p, resp.Status, err)
	}
	return n
}

// waitGoroutines waits until replica p runs at most want goroutines plus
// two for each descriptor it holds past fdsBefore (the read and write
// loops of a connection still open) and a few for timers and the scrape,
// failing the test with the counts when it never does.
func (s *stack) waitGoroutines(t *testing.T, p, want, fdsBefore int) (got int) {
	t.Helper()
	const slack = 10
	poll.UntilNil(t, fmt.Sprintf("replica %d's goroutines to come back down to %d", p, want), func() error {
		s.clients[p].CloseIdleConnections()
		got = s.goroutines(t, p)
		if allowed := want + 2*max(s.fds(t, p)-fdsBefore, 0) + slack; got > allowed {
			return fmt.Errorf("%d goroutines, at most %d allowed", got, allowed)
		}
		return nil
	})
	return got
}

// waitFDs waits until replica p holds at most want+slack descriptors, and
// returns what it last counted, failing the test when it never does.
// Connections the client closed end on the replica's side a moment later,
// and its keep-alive connections to the nodes (claim-token reads) may stay
// open: slack allows a handful.
func (s *stack) waitFDs(t *testing.T, p, want, slack int) (got int) {
	t.Helper()
	s.clients[p].CloseIdleConnections()
	poll.UntilNil(t, fmt.Sprintf("replica %d's file descriptors to come back down to %d", p, want), func() error {
		if got = s.fds(t, p); got > want+slack {
			return fmt.Errorf("%d descriptors, at most %d allowed", got, want+slack)
		}
		return nil
	})
	return got
}
