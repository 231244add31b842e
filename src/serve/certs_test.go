package serve_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

func TestCertFilesReload(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeCert(t, dir)
	clk := clocktesting.NewFakePassiveClock(time.Now())
	c, err := serve.LoadCertFiles(certFile, keyFile, clk)
	if err != nil {
		t.Fatal(err)
	}
	first, _ := c.GetCertificate(nil)
	// A rotated pair is picked up at the next check, not before.
	later := time.Now().Add(time.Hour)
	newCert, newKey := writeCert(t, t.TempDir())
	for _, p := range [][2]string{{newCert, certFile}, {newKey, keyFile}} {
		b, _ := os.ReadFile(p[0])
		_ = os.WriteFile(p[1], b, 0o600)
		_ = os.Chtimes(p[1], later, later)
	}
	clk.SetTime(clk.Now().Add(serve.CertReloadInterval - time.Second))
	if got, _ := c.GetCertificate(nil); got != first {
		t.Fatal("reloaded before the check interval")
	}
	clk.SetTime(clk.Now().Add(time.Second))
	if got, _ := c.GetCertificate(nil); got == first {
		t.Fatal("rotated certificate not picked up")
	}
	// A broken rotation keeps the last good pair.
	good, _ := c.GetCertificate(nil)
	_ = os.WriteFile(keyFile, []byte("garbage"), 0o600)
	_ = os.Chtimes(keyFile, later.Add(time.Hour), later.Add(time.Hour))
	clk.SetTime(clk.Now().Add(serve.CertReloadInterval))
	if got, _ := c.GetCertificate(nil); got != good {
		t.Fatal("a broken key replaced the serving certificate")
	}
}

func TestLoadCertFilesRefusesABrokenPair(t *testing.T) {
	dir := t.TempDir()
	certFile, _ := writeCert(t, dir)
	if _, err := serve.LoadCertFiles(certFile, certFile, nil); err == nil {
		t.Fatal("a certificate loaded as its own key")
	}
	if _, err := serve.LoadCertFiles(certFile, filepath.Join(dir, "missing"), nil); err == nil {
		t.Fatal("a missing key loaded")
	}
}

func TestServesTLSWithHTTP2(t *testing.T) {
	certFile, keyFile := writeCert(t, t.TempDir())
	certs, err := serve.LoadCertFiles(certFile, keyFile, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := serve.Listen(serve.ServerConfig{Name: "data plane", Addr: "127.0.0.1:0", TLS: certs.TLSConfig(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, r.Proto) })})
	if err != nil {
		t.Fatal(err)
	}
	stop := serveInBackground(s)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	pool := x509.NewCertPool()
	certPEM, _ := os.ReadFile(certFile)
	pool.AppendCertsFromPEM(certPEM)
	tr := &http.Transport{ForceAttemptHTTP2: true, TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "x.sandbox.example.com"}}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 30 * time.Second}).Get("https://" + s.Addr().String() + "/")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "HTTP/2.0" {
		t.Fatalf("served over %q, want HTTP/2.0", body)
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
	write := func(name string, block *pem.Block) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return write("tls.crt", &pem.Block{Type: "CERTIFICATE", Bytes: der}), write("tls.key", &pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
}
