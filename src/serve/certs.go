package serve

import (
	"context"
	"crypto/tls"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
)

// CertFiles serves the certificate in a cert/key file pair and picks up a
// rotated pair without a restart (a Secret mount updated by cert-manager).
// controller-runtime's certwatcher does the watching: file events, which
// see a Secret mount's symlink swap, with a periodic re-read behind them.
// A pair that fails to load after a change keeps the previous one in
// service.
type CertFiles struct {
	watcher *certwatcher.CertWatcher
}

// LoadCertFiles loads the pair; a pair that does not load fails here, at
// startup. Run must be running for rotations to be seen.
func LoadCertFiles(certFile, keyFile string) (*CertFiles, error) {
	w, err := certwatcher.New(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("loading the certificate %s and its key %s: %w", certFile, keyFile, err)
	}
	return &CertFiles{watcher: w}, nil
}

// Run watches the files until ctx ends; run it in the process's Group.
func (c *CertFiles) Run(ctx context.Context) error {
	if err := c.watcher.Start(ctx); err != nil {
		return fmt.Errorf("watching the certificate files: %w", err)
	}
	return nil
}

// Reload reads the pair now. On an error the pair in service stays.
func (c *CertFiles) Reload() error { return c.watcher.ReadCertificate() }

// TLSConfig serves the pair, TLS 1.2 or later.
func (c *CertFiles) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.GetCertificate}
}

// GetCertificate is the tls.Config hook: the pair in service.
func (c *CertFiles) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.watcher.GetCertificate(hello)
}
