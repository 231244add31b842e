package cluster

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certValidity is how long every certificate the cluster issues is valid:
// long enough for any test run, short enough that a leaked file is useless
// soon after.
const certValidity = 24 * time.Hour

// FrontProxyClientName is the common name of the client certificate the
// kube-apiserver's aggregator presents to aggregated servers, and the one
// name the cluster allows in --requestheader-allowed-names.
const FrontProxyClientName = "front-proxy-client"

// keyPair is a certificate with its private key, in memory and PEM.
type keyPair struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// pki is every certificate and key the kube-apiserver is started with.
//
// The serving CA is generated here rather than left to --cert-dir's
// self-signing, so clients and kubeconfigs can verify the server from the
// start instead of reading back whatever the server wrote.
type pki struct {
	servingCA  *keyPair // signs serving
	serving    *keyPair // kube-apiserver's TLS certificate for 127.0.0.1/localhost
	clientCA   *keyPair // --client-ca-file; published in extension-apiserver-authentication
	frontProxy *keyPair // --requestheader-client-ca-file
	proxyCli   *keyPair // --proxy-client-cert-file, CN=front-proxy-client, signed by frontProxy
	saKey      []byte   // PEM private key signing service-account tokens
	saPub      []byte   // PEM public key verifying them
}

// newPKI generates all certificates and keys. ECDSA P-256 keeps generation
// in the low milliseconds even on a loaded machine.
// newPKI makes the cluster's certificates; the serving certificate also
// names extraIPs (a node cluster's service and node addresses).
func newPKI(extraIPs []net.IP) (*pki, error) {
	var (
		p   pki
		err error
	)
	if p.servingCA, err = newCA("sandbox-operator-test-serving-ca"); err != nil {
		return nil, err
	}
	if p.serving, err = p.servingCA.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		IPAddresses: append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, extraIPs...),
	}); err != nil {
		return nil, err
	}
	if p.clientCA, err = newCA("sandbox-operator-test-client-ca"); err != nil {
		return nil, err
	}
	if p.frontProxy, err = newCA("sandbox-operator-test-front-proxy-ca"); err != nil {
		return nil, err
	}
	if p.proxyCli, err = p.frontProxy.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: FrontProxyClientName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}); err != nil {
		return nil, err
	}
	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate service-account key: %w", err)
	}
	if p.saKey, err = encodeKey(saKey); err != nil {
		return nil, err
	}
	// --service-account-key-file reads public keys (or PKCS#1/SEC 1
	// private keys), not PKCS#8, so the verifying half gets its own file.
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return nil, fmt.Errorf("encode service-account public key: %w", err)
	}
	p.saPub = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return &p, nil
}

// newCA returns a self-signed certificate authority named cn.
func newCA(cn string) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", cn, err)
	}
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: cn},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return sign(tmpl, key, nil)
}

// issue returns a leaf certificate from tmpl signed by ca, with a fresh key.
func (ca *keyPair) issue(tmpl *x509.Certificate) (*keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate %s key: %w", tmpl.Subject.CommonName, err)
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	return sign(tmpl, key, ca)
}

// sign fills tmpl's serial number and validity and signs it with parent, or
// self-signs it when parent is nil.
func sign(tmpl *x509.Certificate, key *ecdsa.PrivateKey, parent *keyPair) (*keyPair, error) {
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certificate serial: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour) // tolerate clock skew between processes
	tmpl.NotAfter = now.Add(certValidity)

	issuer, signer := tmpl, crypto.Signer(key)
	if parent != nil {
		issuer, signer = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, key.Public(), signer)
	if err != nil {
		return nil, fmt.Errorf("sign %s certificate: %w", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("parse %s certificate: %w", tmpl.Subject.CommonName, err)
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// pkiFiles are the paths of the PEM files the kube-apiserver reads.
type pkiFiles struct {
	servingCert, servingKey     string
	clientCA                    string
	frontProxyCA                string
	proxyClientCert, proxyClKey string
	saKey, saPub                string
}

// write stores the PEM files the kube-apiserver needs under dir, private
// keys readable by the owner only.
func (p *pki) write(dir string) (pkiFiles, error) {
	f := pkiFiles{
		servingCert:     filepath.Join(dir, "serving.crt"),
		servingKey:      filepath.Join(dir, "serving.key"),
		clientCA:        filepath.Join(dir, "client-ca.crt"),
		frontProxyCA:    filepath.Join(dir, "front-proxy-ca.crt"),
		proxyClientCert: filepath.Join(dir, "front-proxy-client.crt"),
		proxyClKey:      filepath.Join(dir, "front-proxy-client.key"),
		saKey:           filepath.Join(dir, "service-account.key"),
		saPub:           filepath.Join(dir, "service-account.pub"),
	}
	// The serving certificate file carries its CA too, as kubeadm's does, so
	// a client that only trusts the CA can verify the chain.
	files := []struct {
		path string
		data []byte
	}{
		{f.servingCert, append(append([]byte{}, p.serving.certPEM...), p.servingCA.certPEM...)},
		{f.servingKey, p.serving.keyPEM},
		{f.clientCA, p.clientCA.certPEM},
		{f.frontProxyCA, p.frontProxy.certPEM},
		{f.proxyClientCert, p.proxyCli.certPEM},
		{f.proxyClKey, p.proxyCli.keyPEM},
		{f.saKey, p.saKey},
		{f.saPub, p.saPub},
	}
	for _, file := range files {
		if err := os.WriteFile(file.path, file.data, 0o600); err != nil {
			return pkiFiles{}, fmt.Errorf("write %s: %w", file.path, err)
		}
	}
	return f, nil
}
