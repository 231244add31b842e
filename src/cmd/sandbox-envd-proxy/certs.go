package main

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certReloadInterval is how often the serving certificate's files are
// checked for a new version (a Secret mount updated by cert-manager).
const certReloadInterval = time.Minute

// certFiles serves the certificate in a cert/key file pair and picks up a
// rotated pair without a restart. A pair that fails to load after a
// change keeps the previous one in service.
type certFiles struct {
	certFile, keyFile string
	now               func() time.Time

	mu       sync.Mutex
	cert     *tls.Certificate
	checked  time.Time
	modTimes [2]time.Time
}

func loadCertFiles(certFile, keyFile string) (*certFiles, error) {
	c := &certFiles{certFile: certFile, keyFile: keyFile, now: time.Now}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certFiles) reload() error {
	mods, err := c.stat()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("loading --tls-cert-file %s and --tls-private-key-file %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.modTimes, c.checked = &cert, mods, c.now()
	return nil
}

func (c *certFiles) stat() ([2]time.Time, error) {
	var mods [2]time.Time
	for i, p := range []string{c.certFile, c.keyFile} {
		fi, err := os.Stat(p)
		if err != nil {
			return mods, fmt.Errorf("TLS file: %w", err)
		}
		mods[i] = fi.ModTime()
	}
	return mods, nil
}

// GetCertificate is the tls.Config hook.
func (c *certFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now().Sub(c.checked) >= certReloadInterval {
		c.checked = c.now()
		if mods, err := c.stat(); err == nil && mods != c.modTimes {
			_ = c.reload() // on failure the previous pair stays in service
		}
	}
	return c.cert, nil
}
