package serve

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// CertReloadInterval is how often a CertFiles pair is checked for a new
// version on disk (a Secret mount updated by cert-manager).
const CertReloadInterval = time.Minute

// CertFiles serves the certificate in a cert/key file pair and picks up a
// rotated pair without a restart. A pair that fails to load after a
// change keeps the previous one in service.
type CertFiles struct {
	certFile, keyFile string
	clock             clock.PassiveClock

	mu       sync.Mutex
	cert     *tls.Certificate
	checked  time.Time
	modTimes [2]time.Time
}

// LoadCertFiles loads the pair; clk (nil is the real clock) times the
// reload checks.
func LoadCertFiles(certFile, keyFile string, clk clock.PassiveClock) (*CertFiles, error) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	c := &CertFiles{certFile: certFile, keyFile: keyFile, clock: clk}
	if err := c.reload(); err != nil {
		return nil, err
	}
	return c, nil
}

// TLSConfig serves the pair, TLS 1.2 or later.
func (c *CertFiles) TLSConfig() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.GetCertificate}
}

func (c *CertFiles) reload() error {
	mods, err := c.stat()
	if err != nil {
		return err
	}
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("loading the certificate %s and its key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert, c.modTimes, c.checked = &cert, mods, c.clock.Now()
	return nil
}

func (c *CertFiles) stat() ([2]time.Time, error) {
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
func (c *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.clock.Since(c.checked) >= CertReloadInterval {
		c.checked = c.clock.Now()
		if mods, err := c.stat(); err == nil && mods != c.modTimes {
			_ = c.reload() // on failure the previous pair stays in service
		}
	}
	return c.cert, nil
}
