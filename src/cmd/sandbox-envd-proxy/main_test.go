package main

import (
	"bytes"
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
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/internal/inventorytest"
	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestUnknownLogLevelFailsStartup(t *testing.T) {
	t.Setenv(logging.LevelEnv, "chatty")
	var stderr bytes.Buffer
	if code := run([]string{"--help"}, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), `OPERATOR_LOG_LEVEL="chatty"`) {
		t.Errorf("unknown level: exit %d, %q", code, stderr.String())
	}
}

// TestFlagsMatchTheReference pins every flag of the configuration
// reference with its default.
func TestFlagsMatchTheReference(t *testing.T) {
	fs := newOptions().flagSet()
	for name, def := range map[string]string{
		"bind-address": ":8443", "domain": "", "namespace": "default",
		"tls-cert-file": "", "tls-private-key-file": "", "guest-http2": "false",
		"e2b-envd-secret-file": "", "sandboxd-token": "", "sandboxd-token-file": "",
		"inventory-stale-after": "1m30s", "kubeconfig": "",
	} {
		f := fs.Lookup(name)
		if f == nil {
			t.Errorf("--%s is missing", name)
			continue
		}
		if f.DefValue != def {
			t.Errorf("--%s defaults to %q, want %q", name, f.DefValue, def)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestStartupRefusesBadFlags(t *testing.T) {
	dir := t.TempDir()
	secret := writeFile(t, dir, "secret", "s3cret\n")
	token := writeFile(t, dir, "token", "root\n")
	empty := writeFile(t, dir, "empty", "\n")
	cert, key := writeCert(t, dir)
	base := []string{"--domain=sandbox.example.com", "--e2b-envd-secret-file=" + secret, "--sandboxd-token-file=" + token}
	without := func(prefix string) []string {
		var out []string
		for _, a := range base {
			if !strings.HasPrefix(a, prefix) {
				out = append(out, a)
			}
		}
		return out
	}
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"no domain", without("--domain"), "--domain"},
		{"url as domain", append(without("--domain"), "--domain=https://x.example.com"), "--domain"},
		{"no secret file", without("--e2b-envd-secret-file"), "--e2b-envd-secret-file"},
		{"missing secret file", append(without("--e2b-envd-secret-file"), "--e2b-envd-secret-file="+filepath.Join(dir, "nope")), "--e2b-envd-secret-file"},
		{"empty secret file", append(without("--e2b-envd-secret-file"), "--e2b-envd-secret-file="+empty), "empty"},
		{"no token", without("--sandboxd-token-file"), "--sandboxd-token"},
		{"empty token file", append(without("--sandboxd-token-file"), "--sandboxd-token-file="+empty), "empty"},
		{"cert without key", append(base, "--tls-cert-file="+cert), "set together"},
		{"key without cert", append(base, "--tls-private-key-file="+key), "set together"},
		{"key that is not a key", append(base, "--tls-cert-file="+cert, "--tls-private-key-file="+secret), "--tls-private-key-file"},
		{"zero stale window", append(base, "--inventory-stale-after=0s"), "--inventory-stale-after"},
		{"stray argument", append(base, "extra"), "unexpected"},
	} {
		var stderr bytes.Buffer
		code := run(c.args, io.Discard, &stderr)
		if code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("%s: exit %d, stderr %q; want 2 naming %q", c.name, code, stderr.String(), c.want)
		}
		if strings.Contains(stderr.String(), "s3cret") || strings.Contains(stderr.String(), "root\n") {
			t.Errorf("%s: stderr shows a credential: %q", c.name, stderr.String())
		}
	}
}

// TestServe runs the binary's server over TLS on a fake apiserver's
// NodeInventory and a simulated fleet: probe, then an HTTP/2 request into
// the echo guest.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir)
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: 1, RootToken: "root", Pools: []sandboxd.PoolSpec{{Template: "base", Warm: 1}}, RefillDelay: time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	root, _ := sandboxd.New(f.Node(0).Addr(), sandboxd.WithToken("root"))
	cl, err := root.Claim(context.Background(), sandboxd.ClaimRequest{Template: "base", ClaimRef: "default/a"})
	if err != nil {
		t.Fatal(err)
	}

	// An unstructured-only scheme: the informer lists what a real
	// apiserver would serve.
	scheme := runtime.NewScheme()
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(scheme,
		map[schema.GroupVersionResource]string{v1beta1.NodeInventoryGVR: v1beta1.NodeInventoryListKind})
	inv := inventorytest.ToUnstructured(t, inventorytest.FromSnapshot(f.Node(0).Snapshot(), time.Now()))
	if _, err := dyn.Resource(v1beta1.NodeInventoryGVR).Create(context.Background(), inv, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	o := newOptions()
	o.domain = "sandbox.example.com"
	o.tlsCertFile, o.tlsKeyFile = certFile, keyFile
	o.secretFile = writeFile(t, dir, "secret", "s3cret")
	o.token.Token = "root"
	creds, err := o.loadCredentials()
	if err != nil {
		t.Fatal(err)
	}
	o.bindAddress = "127.0.0.1:0"
	o.metricsAddr = "127.0.0.1:0"
	logger := slog.New(slog.DiscardHandler)
	signal, sendSignal := context.WithCancel(context.Background())
	drain := serve.NewDrain(signal, time.Hour, logger)
	informer, err := inventory.NewInformerFor(dyn)
	if err != nil {
		t.Fatal(err)
	}
	p, err := listen(logger, o, creds, informer, drain)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(drain.Context())
	done := make(chan error, 1)
	go func() { done <- p.run(ctx, logger) }()
	t.Cleanup(func() {
		sendSignal()
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	})

	pool := x509.NewCertPool()
	certPEM, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(certPEM)
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "x.sandbox.example.com"}}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	base := "https://" + p.srv.Addr().String()

	inventorytest.Eventually(t, "ready", func() bool {
		resp, err := hc.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write([]byte(cl.Token))
	req, _ := http.NewRequest(http.MethodGet, base+"/via-binary", nil)
	req.Host = "8080-" + strings.Replace(cl.ID, "_", "-", 1) + ".sandbox.example.com"
	req.Header.Set("X-Access-Token", hex.EncodeToString(mac.Sum(nil)))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 || !strings.Contains(string(body), `"path":"/via-binary"`) {
		t.Fatalf("%s %d %s", resp.Proto, resp.StatusCode, body)
	}

	// The metrics listener serves the data plane's counts: the relayed
	// request and its dial, and none of the probes above.
	scrapeURL := "http://" + p.metrics.Addr().String() + serve.MetricsPath
	var scraped string
	poll.Until(t, "the relayed request counted on the metrics listener", func() bool {
		resp, err := http.Get(scrapeURL)
		if err != nil {
			return false
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		scraped = string(b)
		return strings.Contains(scraped, `sandbox_operator_dataplane_requests_total{code="200"} 1`+"\n")
	})
	for _, line := range []string{
		`sandbox_operator_dataplane_requests_total{code="503"} 0`,
		`sandbox_operator_dataplane_relay_dial_duration_seconds_count{outcome="ok"} 1`,
		`sandbox_operator_dataplane_open_streams 0`,
	} {
		if !strings.Contains(scraped, line+"\n") {
			t.Errorf("/metrics does not say %s", line)
		}
	}

	// SIGTERM: the probe fails at once, so the Service stops routing here,
	// while what still arrives during the shutdown delay is proxied.
	sendSignal()
	inventorytest.Eventually(t, "not ready once draining", func() bool {
		resp, err := hc.Get(base + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable
	})
	resp, err = hc.Do(req.Clone(context.Background()))
	if err != nil {
		t.Fatalf("a request during the shutdown delay: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("a request during the shutdown delay answered %d", resp.StatusCode)
	}
}

// writeCert writes a self-signed wildcard pair for *.sandbox.example.com.
func writeCert(t *testing.T, dir string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: "*.sandbox.example.com"},
		DNSNames: []string{"*.sandbox.example.com"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile := writeFile(t, dir, "tls.crt", string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})))
	keyFile := writeFile(t, dir, "tls.key", string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})))
	return certFile, keyFile
}
