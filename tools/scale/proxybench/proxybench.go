package proxybench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	inventoryv1beta1 "github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// Defaults of Config.
const (
	DefaultRequests       = 2000
	DefaultWarmupRequests = 200
	DefaultBulkBytes      = 64 << 20
	DefaultBulkRepeats    = 3
	DefaultTimeout        = 2 * time.Minute
)

const (
	// SmallBytes is the answer size of a small request.
	SmallBytes = 128
	// domain is the proxy's --domain; hosts are {port}-{id}.{domain}.
	domain = "sandbox.scale.test"
	// publishInterval is the node's NodeInventory period: short, so the
	// claim is in the proxy's view a second after it is made.
	publishInterval = time.Second
	// requestTimeout bounds one small request; bulk ones get the Timeout.
	requestTimeout = 30 * time.Second
	// claimTTL outlasts any run; the claim is released with the fleet.
	claimTTL = time.Hour
)

// Config configures one measurement.
type Config struct {
	// Cluster is the running kube-apiserver the node publishes to and the
	// proxy reads. Required; Run installs the NodeInventory CRD.
	Cluster *cluster.Cluster
	// Requests is the number of small GETs (128-byte answer) timed on
	// each path, sequentially; default DefaultRequests.
	Requests int
	// WarmupRequests are sent on each path first and not timed; default
	// DefaultWarmupRequests.
	WarmupRequests int
	// BulkBytes is the size of one bulk download and upload; default
	// DefaultBulkBytes.
	BulkBytes int64
	// BulkRepeats is how many times each bulk transfer is timed on each
	// path (the median is reported); default DefaultBulkRepeats.
	BulkRepeats int
	// Timeout bounds each setup wait and each bulk transfer; default
	// DefaultTimeout.
	Timeout time.Duration
	// Logf receives progress lines; nil discards them.
	Logf func(format string, args ...any)
}

// Result is one measurement.
type Result struct {
	Requests       int   `json:"requests"`
	WarmupRequests int   `json:"warmup_requests"`
	SmallBytes     int   `json:"small_response_bytes"`
	BulkBytes      int64 `json:"bulk_bytes"`
	BulkRepeats    int   `json:"bulk_repeats"`

	// Direct is the guest-port relay with one relay per request, Proxied
	// the same requests through sandbox-envd-proxy.
	Direct  Path `json:"direct"`
	Proxied Path `json:"proxied"`
	// DirectReusedRelay is small requests over one relay kept open, for
	// reference (see the package comment).
	DirectReusedRelay Path `json:"direct_reused_relay"`

	// Floor is small requests on a kept connection to the guest's
	// handler served straight from another process: what one HTTP
	// exchange between two processes costs on this machine, and so the
	// least any hop added to the path can add.
	Floor Path `json:"floor"`

	// AddedP50Ms (and P95, P99) is proxied − direct latency at that
	// percentile.
	AddedP50Ms float64 `json:"added_p50_ms"`
	AddedP95Ms float64 `json:"added_p95_ms"`
	AddedP99Ms float64 `json:"added_p99_ms"`
	// ProxyOwnP50Ms is AddedP50Ms less the floor's p50: what the proxy's
	// own work adds beyond the exchange its hop costs any process.
	ProxyOwnP50Ms float64 `json:"proxy_own_p50_ms"`
	// DownloadRatio and UploadRatio are proxied ÷ direct median
	// throughput (1 = the proxy costs nothing).
	DownloadRatio float64 `json:"download_ratio"`
	UploadRatio   float64 `json:"upload_ratio"`

	// ProxyStartS is how long the binary took to answer /healthz (it was
	// built, or found, before).
	ProxyStartS float64 `json:"proxy_start_s"`
}

// Path is one way of reaching the guest.
type Path struct {
	// Reuse says what the path keeps open from one request to the next.
	Reuse    string      `json:"reuse"`
	Latency  Latency     `json:"latency"`
	Download *Throughput `json:"download,omitempty"`
	Upload   *Throughput `json:"upload,omitempty"`
}

func (c *Config) defaults() error {
	if c.Cluster == nil {
		return errors.New("proxybench: Config.Cluster is required")
	}
	if c.Requests <= 0 {
		c.Requests = DefaultRequests
	}
	if c.WarmupRequests < 0 {
		c.WarmupRequests = 0
	} else if c.WarmupRequests == 0 {
		c.WarmupRequests = DefaultWarmupRequests
	}
	if c.BulkBytes <= 0 {
		c.BulkBytes = DefaultBulkBytes
	}
	if c.BulkRepeats <= 0 {
		c.BulkRepeats = DefaultBulkRepeats
	}
	if c.Timeout <= 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Logf == nil {
		c.Logf = func(string, ...any) {}
	}
	return nil
}

// Run starts one simulated node and sandbox-envd-proxy against
// cfg.Cluster, claims a sandbox, measures, and stops both (and deletes the
// node's NodeInventory) before it returns. A failure to clean up is
// returned with the result.
func Run(ctx context.Context, cfg Config) (res Result, err error) {
	if err := cfg.defaults(); err != nil {
		return Result{}, err
	}
	b := &bench{cfg: cfg}
	defer func() {
		if cerr := b.cleanup(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("proxybench: clean-up: %w", cerr))
		}
	}()
	if err := b.setup(ctx); err != nil {
		return Result{}, fmt.Errorf("proxybench: %w", err)
	}
	res, err = b.measure(ctx)
	if err != nil {
		return res, fmt.Errorf("proxybench: %w", err)
	}
	return res, nil
}

// bench is one measurement's state; cleanup undoes whatever setup got to.
type bench struct {
	cfg Config
	dir string

	dyn      dynamic.Interface
	fleet    *simfleet.Fleet
	nodeName string
	proxy    *proxyProcess
	proxyUp  time.Duration

	// floor serves the floor path; plan is what the client is told.
	floor    net.Listener
	floorSrv *http.Server
	plan     clientPlan
}

func (b *bench) setup(ctx context.Context) error {
	cfg := b.cfg
	c := cfg.Cluster
	// Build (or find) the binary first: a first go build takes a while
	// and must not count as start-up.
	binary, err := testbin.Locate(ProxyBinaryEnv, ProxyPackage, "")
	if err != nil {
		return fmt.Errorf("locating sandbox-envd-proxy: %w", err)
	}
	if err := c.InstallCRDs(ctx, crds.NodeInventoryYAML); err != nil {
		return fmt.Errorf("installing the NodeInventory CRD: %w", err)
	}
	if b.dir, err = os.MkdirTemp("", "scale-proxybench-"); err != nil {
		return fmt.Errorf("work directory: %w", err)
	}
	suffix := randomHex(3)
	namespace := "scale-proxybench-" + suffix
	rootToken, secret := randomHex(16), randomHex(32)
	tokenFile, err := writeSecret(b.dir, "sandboxd-token", rootToken)
	if err != nil {
		return err
	}
	secretFile, err := writeSecret(b.dir, "envd-secret", secret)
	if err != nil {
		return err
	}
	if b.dyn, err = dynamic.NewForConfig(c.AdminConfig()); err != nil {
		return fmt.Errorf("dynamic client: %w", err)
	}

	template := "registry.example/scale-proxybench:" + suffix
	b.fleet, err = simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 1, NamePrefix: "proxybench-" + suffix + "-", RootToken: rootToken,
		Pools:     []sandboxd.PoolSpec{{Template: template, Warm: 1}},
		EchoPorts: []int{},
		Guests: []node.Guest{{Port: guestPort, HTTP: func(node.SandboxInfo) (http.Handler, error) {
			return guestHandler(), nil
		}}},
		ReapInterval: time.Hour,
		Publish:      &simfleet.PublishConfig{Client: b.dyn, Interval: publishInterval},
	})
	if err != nil {
		return fmt.Errorf("starting the simulated node: %w", err)
	}
	n := b.fleet.Node(0)
	b.nodeName = n.Name()
	root, err := sandboxd.New(n.Addr(), sandboxd.WithToken(rootToken))
	if err != nil {
		return fmt.Errorf("sandboxd client: %w", err)
	}
	claimCtx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	claim, err := root.Claim(claimCtx, sandboxd.ClaimRequest{
		Template: template, ClaimRef: namespace + "/bench", NoRedirect: true, TTLSeconds: int(claimTTL.Seconds()),
	})
	cancel()
	if err != nil {
		return fmt.Errorf("claiming a sandbox: %w", err)
	}
	cfg.Logf("proxybench: claimed %s on %s; waiting for it in the NodeInventory", claim.ID, b.nodeName)
	if err := b.waitPublished(ctx, claim.ID); err != nil {
		return err
	}

	began := time.Now()
	b.proxy, err = startProxy(ctx, binary, b.dir, proxyArgs{
		kubeconfig: c.Kubeconfig(), domain: domain, namespace: namespace,
		secretFile: secretFile, tokenFile: tokenFile,
	}, cfg.Timeout)
	if err != nil {
		return err
	}
	b.proxyUp = time.Since(began)
	cfg.Logf("proxybench: sandbox-envd-proxy healthy on %s after %.2fs", b.proxy.addr, b.proxyUp.Seconds())

	dnsID, ok := sandbox.DNSID(claim.ID)
	if !ok {
		return fmt.Errorf("claim id %q is not a sandbox id", claim.ID)
	}
	if err := b.startFloor(); err != nil {
		return err
	}
	b.plan = clientPlan{
		Requests: cfg.Requests, WarmupRequests: cfg.WarmupRequests,
		BulkBytes: cfg.BulkBytes, BulkRepeats: cfg.BulkRepeats, BulkTimeout: cfg.Timeout,
		NodeAddr: n.Addr(), SandboxID: claim.ID, ClaimToken: claim.Token,
		ProxyAddr: b.proxy.addr, ProxyHost: strconv.Itoa(guestPort) + "-" + dnsID + "." + domain,
		AccessToken: envdtoken.Derive([]byte(secret), claim.Token),
		FloorAddr:   b.floor.Addr().String(),
	}

	// The informer may trail /healthz by a moment; the first proxied
	// answer proves the proxy places the sandbox.
	probe := newTarget("http://"+b.plan.ProxyAddr, b.plan.ProxyHost, b.plan.AccessToken,
		&http.Transport{Proxy: nil, DisableKeepAlives: true, DisableCompression: true})
	defer probe.transport.CloseIdleConnections()
	return waitFor(ctx, cfg.Timeout, "the proxy routes to the sandbox", func() (bool, string) {
		if _, err := probe.small(ctx); err != nil {
			return false, err.Error()
		}
		return true, ""
	})
}

// startFloor serves the guest's handler straight from this process on
// loopback: the floor path, one HTTP exchange between two processes on a
// kept connection, which any hop added to the path costs at least.
func (b *bench) startFloor() error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("floor listener: %w", err)
	}
	b.floor = ln
	b.floorSrv = &http.Server{Handler: guestHandler(), ReadHeaderTimeout: requestTimeout}
	go func() { _ = b.floorSrv.Serve(ln) }()
	return nil
}

// waitPublished waits until the node's NodeInventory lists the claim, so
// the proxy's informer places it rather than asking every node.
func (b *bench) waitPublished(ctx context.Context, id string) error {
	api := b.dyn.Resource(inventoryv1beta1.NodeInventoryGVR)
	return waitFor(ctx, b.cfg.Timeout, "the claim in the NodeInventory", func() (bool, string) {
		u, err := api.Get(ctx, b.nodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		var inv inventoryv1beta1.NodeInventory
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &inv); err != nil {
			return false, err.Error()
		}
		for _, e := range inv.Entries {
			if sandbox.SameID(e.ID, id) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d entries, none %s", len(inv.Entries), id)
	})
}

func (b *bench) measure(ctx context.Context) (Result, error) {
	cfg := b.cfg
	res := Result{
		Requests: cfg.Requests, WarmupRequests: cfg.WarmupRequests, SmallBytes: SmallBytes,
		BulkBytes: cfg.BulkBytes, BulkRepeats: cfg.BulkRepeats, ProxyStartS: b.proxyUp.Seconds(),
	}
	cfg.Logf("proxybench: a client process sends %d warm-up and %d timed small GETs per path, interleaved, then the bulk transfers", cfg.WarmupRequests, cfg.Requests)
	rep, err := runClientProcess(ctx, b.plan, logWriter{cfg.Logf})
	if err != nil {
		return res, err
	}
	var lat [numPaths]Latency
	for j := range numPaths {
		lat[j] = summarize(rep.Small[j])
		lat[j].ReusedConnections = rep.Reused[j]
	}
	res.Direct = Path{Reuse: "nothing: a new node connection and relay per request", Latency: lat[pathDirect]}
	res.Proxied = Path{Reuse: "the client's keep-alive connection to the proxy; the proxy opens a new relay per request", Latency: lat[pathProxied]}
	res.DirectReusedRelay = Path{Reuse: "one relay kept open, HTTP keep-alive inside it", Latency: lat[pathReusedRelay]}
	res.Floor = Path{Reuse: "a keep-alive connection to the guest's handler served from another process, no relay", Latency: lat[pathFloor]}
	res.AddedP50Ms = lat[pathProxied].P50Ms - lat[pathDirect].P50Ms
	res.AddedP95Ms = lat[pathProxied].P95Ms - lat[pathDirect].P95Ms
	res.AddedP99Ms = lat[pathProxied].P99Ms - lat[pathDirect].P99Ms
	res.ProxyOwnP50Ms = res.AddedP50Ms - lat[pathFloor].P50Ms
	cfg.Logf("proxybench: small GET p50/p95/p99 ms: direct %.3f/%.3f/%.3f, proxied %.3f/%.3f/%.3f, reused relay %.3f/%.3f/%.3f, floor %.3f/%.3f/%.3f",
		lat[0].P50Ms, lat[0].P95Ms, lat[0].P99Ms, lat[1].P50Ms, lat[1].P95Ms, lat[1].P99Ms,
		lat[2].P50Ms, lat[2].P95Ms, lat[2].P99Ms, lat[3].P50Ms, lat[3].P95Ms, lat[3].P99Ms)

	res.Direct.Download = ptr(throughput(cfg.BulkBytes, rep.Download[pathDirect]))
	res.Proxied.Download = ptr(throughput(cfg.BulkBytes, rep.Download[pathProxied]))
	res.Direct.Upload = ptr(throughput(cfg.BulkBytes, rep.Upload[pathDirect]))
	res.Proxied.Upload = ptr(throughput(cfg.BulkBytes, rep.Upload[pathProxied]))
	res.DownloadRatio = ratio(res.Proxied.Download.MedianMBps, res.Direct.Download.MedianMBps)
	res.UploadRatio = ratio(res.Proxied.Upload.MedianMBps, res.Direct.Upload.MedianMBps)
	cfg.Logf("proxybench: %d MiB download MB/s direct %.0f, proxied %.0f (×%.2f); upload direct %.0f, proxied %.0f (×%.2f)",
		cfg.BulkBytes>>20, res.Direct.Download.MedianMBps, res.Proxied.Download.MedianMBps, res.DownloadRatio,
		res.Direct.Upload.MedianMBps, res.Proxied.Upload.MedianMBps, res.UploadRatio)
	return res, nil
}

func ptr[T any](v T) *T { return &v }

// logWriter passes the client process's stderr on, a line per write.
type logWriter struct{ logf func(string, ...any) }

func (w logWriter) Write(p []byte) (int, error) {
	w.logf("proxybench client: %s", bytes.TrimRight(p, "\n"))
	return len(p), nil
}

// cleanup stops the proxy and the node and deletes the node's
// NodeInventory and the work directory.
func (b *bench) cleanup() error {
	var errs []error
	if b.floorSrv != nil {
		errs = append(errs, b.floorSrv.Close())
	}
	if b.proxy != nil {
		errs = append(errs, b.proxy.stop())
	}
	if b.fleet != nil {
		if err := b.fleet.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the simulated node: %w", err))
		}
	}
	if b.nodeName != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		err := b.dyn.Resource(inventoryv1beta1.NodeInventoryGVR).Delete(ctx, b.nodeName, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting NodeInventory %s: %w", b.nodeName, err))
		}
	}
	if b.dir != "" {
		errs = append(errs, os.RemoveAll(b.dir))
	}
	return errors.Join(errs...)
}

// target is one path to the guest: a base URL, the Host the request
// carries and the access token the proxy wants, over its own transport.
type target struct {
	base, host, accessToken string
	transport               *http.Transport
	client                  *http.Client
}

func newTarget(base, host, accessToken string, tr *http.Transport) *target {
	return &target{base: base, host: host, accessToken: accessToken, transport: tr, client: &http.Client{Transport: tr}}
}

func (t *target) request(ctx context.Context, method, pathQuery string, body io.Reader, size int64) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, t.base+pathQuery, body)
	if err != nil {
		return nil, fmt.Errorf("building %s %s: %w", method, pathQuery, err)
	}
	req.Host = t.host
	if body != nil {
		req.ContentLength = size
	}
	if t.accessToken != "" {
		req.Header.Set("X-Access-Token", t.accessToken)
	}
	return req, nil
}

// smallSample is one timed small request.
type smallSample struct {
	took   time.Duration
	reused bool // over a connection the client had open already
}

// small times one GET of SmallBytes, from sending to the last byte read.
func (t *target) small(ctx context.Context) (smallSample, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	var s smallSample
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { s.reused = i.Reused }})
	req, err := t.request(ctx, http.MethodGet, "/bytes?n="+strconv.Itoa(SmallBytes), nil, 0)
	if err != nil {
		return s, err
	}
	start := time.Now()
	n, err := t.exchange(req)
	s.took = time.Since(start)
	if err != nil {
		return s, err
	}
	if n != SmallBytes {
		return s, fmt.Errorf("GET %s: %d bytes, want %d", t.host, n, SmallBytes)
	}
	return s, nil
}

// download times GET of size bytes until the last one is read.
func (t *target) download(ctx context.Context, size int64) (time.Duration, error) {
	req, err := t.request(ctx, http.MethodGet, "/bytes?n="+strconv.FormatInt(size, 10), nil, 0)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := t.exchange(req)
	took := time.Since(start)
	if err != nil {
		return 0, err
	}
	if n != size {
		return 0, fmt.Errorf("download via %s: %d bytes, want %d", t.host, n, size)
	}
	return took, nil
}

// upload times a POST of size bytes until the guest's answer, which is
// the count it received.
func (t *target) upload(ctx context.Context, size int64) (time.Duration, error) {
	req, err := t.request(ctx, http.MethodPost, "/upload", io.LimitReader(zeros{}, size), size)
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("upload via %s: %w", t.host, err)
	}
	answer, err := io.ReadAll(io.LimitReader(resp.Body, 64))
	resp.Body.Close()
	took := time.Since(start)
	if err != nil || resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("upload via %s: %s %q %v", t.host, resp.Status, answer, err)
	}
	if got, _ := strconv.ParseInt(string(answer), 10, 64); got != size {
		return 0, fmt.Errorf("upload via %s: the guest got %s bytes, want %d", t.host, answer, size)
	}
	return took, nil
}

// exchange sends req and reads the whole answer, which must be 200.
func (t *target) exchange(req *http.Request) (int64, error) {
	resp, err := t.client.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s via %s: %w", req.Method, req.URL.Path, t.host, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return 0, fmt.Errorf("%s %s via %s: %s: %s", req.Method, req.URL.Path, t.host, resp.Status, msg)
	}
	n, err := io.Copy(io.Discard, resp.Body)
	if err != nil {
		return n, fmt.Errorf("%s %s via %s: reading the answer: %w", req.Method, req.URL.Path, t.host, err)
	}
	return n, nil
}

// waitFor polls cond every 100 ms until it holds, timeout passes or ctx
// ends; the error names what was awaited and its last state.
func waitFor(ctx context.Context, timeout time.Duration, what string, cond func() (bool, string)) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not reached within %v (%s)", what, timeout, state)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: %w (%s)", what, ctx.Err(), state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
