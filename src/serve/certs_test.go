package serve_test

import (
	"context"
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

	"github.com/cocoonstack/sandbox-operator/src/serve"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

func TestCertFilesReload(t *testing.T) {
	// The files are what a Secret mount shows: links into a versioned
	// directory that the kubelet swaps in one rename.
	dir := t.TempDir()
	previous := ""
	mount := func(version string) {
		t.Helper()
		data := filepath.Join(dir, version)
		if err := os.Mkdir(data, 0o700); err != nil {
			t.Fatal(err)
		}
		writeCert(t, data)
		tmp := filepath.Join(dir, "..data_tmp")
		if err := os.Symlink(version, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
		// The kubelet then removes the old version; the watcher sees that
		// at once (its periodic re-read would see the swap later).
		if previous != "" {
			if err := os.RemoveAll(filepath.Join(dir, previous)); err != nil {
				t.Fatal(err)
			}
		}
		previous = version
	}
	mount("v1")
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	c, err := serve.LoadCertFiles(certFile, keyFile)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	first := leaf(t, c)

	mount("v2")
	poll.Until(t, "the rotated certificate in service", func() bool { return !leaf(t, c).Equal(first) })

	// A broken rotation keeps the last good pair in service.
	good := leaf(t, c)
	if err := os.Remove(filepath.Join(dir, "v2", "tls.key")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "v2", "tls.key"), []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := c.Reload(); err == nil {
		t.Fatal("a garbage key loaded")
	}
	if !leaf(t, c).Equal(good) {
		t.Fatal("a broken key replaced the serving certificate")
	}
}

// leaf is the certificate c serves now.
func leaf(t *testing.T, c *serve.CertFiles) *x509.Certificate {
	t.Helper()
	cert, err := c.GetCertificate(nil)
	if err != nil || cert == nil || len(cert.Certificate) == 0 {
		t.Fatalf("no certificate in service: %v", err)
	}
	parsed, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return parsed
}

func TestLoadCertFilesRefusesABrokenPair(t *testing.T) {
	dir := t.TempDir()
	certFile, _ := writeCert(t, dir)
	if _, err := serve.LoadCertFiles(certFile, certFile); err == nil {
		t.Fatal("a certificate loaded as its own key")
	}
	if _, err := serve.LoadCertFiles(certFile, filepath.Join(dir, "missing")); err == nil {
		t.Fatal("a missing key loaded")
	}
}

func TestServesTLSWithHTTP2(t *testing.T) {
	certFile, keyFile := writeCert(t, t.TempDir())
	certs, err := serve.LoadCertFiles(certFile, keyFile)
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
