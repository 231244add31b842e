package envdproxy_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"io"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/echo"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const (
	domain    = "sandbox.test"
	rootToken = "fleet-root-token"
	tmpl      = "base:24.04"

	echoPort   = 8080
	duplexPort = 7000 // line echo, full duplex, flushed per line
	wsPort     = 7001 // answers an Upgrade and then echoes raw bytes
	bulkPort   = 7002 // GET /bytes?n= streams n bytes; POST counts the body
)

var envdSecret = []byte("proxy-test-envd-secret")

// accessToken derives the envd access token independently of the code
// under test: hex(HMAC-SHA256(secret, claim token)).
func accessToken(claimToken string) string {
	mac := hmac.New(sha256.New, envdSecret)
	mac.Write([]byte(claimToken))
	return hex.EncodeToString(mac.Sum(nil))
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// mapLocator is the simplest Locator: ids published by the test.
type mapLocator struct {
	mu     sync.Mutex
	owners map[string]string
	nodes  []string
}

func (m *mapLocator) Owner(id string) (string, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.owners[id]
	return a, ok
}

func (m *mapLocator) Nodes() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.nodes...)
}

func (m *mapLocator) publish(id, addr string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.owners[id] = addr
}

type envOptions struct {
	nodes      int
	guestHTTP2 bool
	tls        bool
	tune       func(*envdproxy.Config)
}

// env is a simulated fleet with the proxy in front of it, served by a real
// http.Server on loopback with the binary's protocol set.
type env struct {
	t     testing.TB
	fleet *simfleet.Fleet
	loc   *mapLocator
	clock *clocktesting.FakeClock
	proxy *envdproxy.Proxy
	addr  string // proxy listener host:port
	url   string // scheme://addr
	hc    *http.Client
	tlsCA *x509.CertPool
	// conns is how many client connections the proxy's server holds.
	conns atomic.Int64
}

func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	if o.nodes == 0 {
		o.nodes = 2
	}
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes:        o.nodes,
		RootToken:    rootToken,
		Pools:        []sandboxd.PoolSpec{{Template: tmpl, Warm: 2}},
		RefillDelay:  time.Millisecond,
		EchoPorts:    []int{echoPort},
		Envd:         &simfleet.EnvdConfig{Secret: envdSecret},
		Guests:       testGuests(),
		ReapInterval: time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })

	e := &env{t: t, fleet: f, loc: &mapLocator{owners: map[string]string{}}, clock: clocktesting.NewFakeClock(time.Unix(1_800_000_000, 0))}
	e.loc.nodes = f.Addrs()
	cfg := envdproxy.Config{
		Locator: e.loc, Domain: domain, Secret: envdSecret, Token: rootToken,
		GuestHTTP2: o.guestHTTP2, Clock: e.clock,
	}
	if o.tune != nil {
		o.tune(&cfg)
	}
	e.proxy, err = envdproxy.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.serve(o.tls)
	return e
}

func (e *env) serve(useTLS bool) {
	t := e.t
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: e.proxy, Protocols: envdproxy.Protocols(), ReadHeaderTimeout: 30 * time.Second,
		ConnState: func(_ net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				e.conns.Add(1)
			case http.StateClosed, http.StateHijacked:
				e.conns.Add(-1)
			}
		}}
	e.addr = ln.Addr().String()
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	if useTLS {
		cert, pool := testCert(t)
		srv.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		e.tlsCA = pool
		e.url = "https://" + e.addr
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, ServerName: "49983-sb-0." + domain}
		tr.ForceAttemptHTTP2 = true
		go func() { _ = srv.ServeTLS(ln, "", "") }()
	} else {
		e.url = "http://" + e.addr
		go func() { _ = srv.Serve(ln) }()
	}
	e.hc = &http.Client{Transport: tr}
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = srv.Close()
	})
}

// claim takes a sandbox on node i (no redirect) and, when publish is set,
// lists it in the locator.
func (e *env) claim(i int, publish bool) *sandboxd.Claim {
	e.t.Helper()
	c := e.root(i)
	cl, err := c.Claim(ctxT(e.t), sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "default/t" + strconv.Itoa(i), NoRedirect: true})
	if err != nil {
		e.t.Fatalf("claim on node %d: %v", i, err)
	}
	if publish {
		e.loc.publish(cl.ID, e.fleet.Node(i).Addr())
	}
	return cl
}

func (e *env) root(i int) *sandboxd.Client {
	e.t.Helper()
	c, err := sandboxd.New(e.fleet.Node(i).Addr(), sandboxd.WithToken(rootToken))
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// gets is GET /v1/sandboxes/{id} requests node i has received.
func (e *env) gets(i int) int64 { return e.fleet.Node(i).Counters().SandboxGets }

// host is the derived data-plane host of a sandbox port.
func host(port int, id string) string {
	return strconv.Itoa(port) + "-" + strings.Replace(id, "sb_", "sb-", 1) + "." + domain
}

type reqOpt func(*http.Request)

func withToken(tok string) reqOpt {
	return func(r *http.Request) { r.Header.Set("X-Access-Token", tok) }
}

func withHeader(k, v string) reqOpt { return func(r *http.Request) { r.Header.Set(k, v) } }

// do sends one request to the proxy with Host set to host and returns the
// status and body.
func (e *env) do(method, host, pathQuery string, body io.Reader, opts ...reqOpt) (int, []byte, http.Header) {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctxT(e.t), method, e.url+pathQuery, body)
	if err != nil {
		e.t.Fatal(err)
	}
	req.Host = host
	for _, o := range opts {
		o(req)
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s%s: %v", method, host, pathQuery, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		e.t.Fatal(err)
	}
	return resp.StatusCode, b, resp.Header
}

func decodeEcho(t testing.TB, b []byte) echo.Request {
	t.Helper()
	var doc echo.Request
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatalf("echo answer %q: %v", b, err)
	}
	return doc
}

// testGuests are the extra guest services the tests reach through the
// proxy.
func testGuests() []node.Guest {
	return []node.Guest{
		{Port: duplexPort, H2C: true, HTTP: func(node.SandboxInfo) (http.Handler, error) { return duplexHandler(), nil }},
		{Port: wsPort, HTTP: func(node.SandboxInfo) (http.Handler, error) { return upgradeHandler(), nil }},
		{Port: bulkPort, H2C: true, HTTP: func(node.SandboxInfo) (http.Handler, error) { return bulkHandler(), nil }},
	}
}

// duplexHandler answers each request line as soon as it arrives, while
// the request body is still open: it proves bytes stream both ways.
func duplexHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		_ = rc.EnableFullDuplex()
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusOK)
		_ = rc.Flush()
		sc := bufio.NewScanner(r.Body)
		for sc.Scan() {
			if _, err := io.WriteString(w, "echo:"+sc.Text()+"\n"); err != nil {
				return
			}
			_ = rc.Flush()
		}
	})
}

// upgradeHandler switches any Upgrade request to a raw byte echo.
func upgradeHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			http.Error(w, "upgrade required", http.StatusUpgradeRequired)
			return
		}
		conn, brw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		_, _ = brw.WriteString("HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: " + r.Header.Get("Upgrade") + "\r\n\r\n")
		_ = brw.Flush()
		buf := make([]byte, 4096)
		for {
			n, err := brw.Read(buf)
			if n > 0 {
				if _, werr := conn.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}

var bulkChunk = make([]byte, 64<<10)

func bulkHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, _ := io.Copy(io.Discard, r.Body)
			_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
			return
		}
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		for n > 0 {
			k := min(n, len(bulkChunk))
			if _, err := w.Write(bulkChunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
}

// testCert is a self-signed wildcard certificate for *.domain (and
// 127.0.0.1) and a pool that trusts it.
func testCert(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmplCert := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "*." + domain},
		DNSNames:              []string{"*." + domain},
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmplCert, tmplCert, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
