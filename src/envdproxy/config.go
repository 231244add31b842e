package envdproxy

import (
	"errors"
	"log/slog"
	"net/http"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of the optional Config fields.
const (
	// DefaultCacheTTL is how long an owner and its derived access token are
	// kept: a steady stream costs one node read per sandbox per minute, and
	// an owner found by asking the nodes outlives their next publish.
	DefaultCacheTTL = time.Minute
	// DefaultLookupRate and DefaultLookupBurst bound the asks about ids the
	// Locator does not list, per proxy. Each ask costs every node one
	// GET /v1/sandboxes/{id}.
	DefaultLookupRate  = 200
	DefaultLookupBurst = 400
	// DefaultLookupTimeout bounds one node read or one ask of every node.
	DefaultLookupTimeout = 10 * time.Second
	// DefaultMaxUploadBytes bounds one envd file upload (POST /files on
	// envd's port), as sent: the simulated envd guest's own default, so
	// a proxy in front of it refuses no upload the guest would take.
	DefaultMaxUploadBytes int64 = 100 << 20
	// DefaultMaxConcurrentUploads is how many envd file uploads one
	// sandbox may have in flight at once. An upload holds about ten file
	// descriptors across the proxy, the node relay and the guest; the SDK
	// writes the files of one files.write call in a single request.
	DefaultMaxConcurrentUploads = 16
)

// Config configures a Proxy.
type Config struct {
	// Locator says which node owns a sandbox. Required.
	Locator Locator
	// Domain is the base domain of {port}-{sandboxID}.{domain} hosts; it
	// must match the e2b surface's. Required.
	Domain string
	// Secret is the envd secret access tokens derive from. Required.
	Secret []byte
	// Token is the fleet sandboxd api_token (the root one): it reads claim
	// tokens by id and relays signed file URLs. Required.
	Token string
	// GuestHTTP2 speaks cleartext HTTP/2 (prior knowledge) to the guest
	// instead of HTTP/1.1. envd 0.8.0 does not serve it.
	GuestHTTP2 bool
	// Logger receives the access log (debug) and operational warnings;
	// default discards. Tokens are never logged.
	Logger *slog.Logger

	// CacheTTL, LookupRate, LookupBurst and LookupTimeout default to the
	// Default* constants when zero.
	CacheTTL      time.Duration
	LookupRate    float64
	LookupBurst   int
	LookupTimeout time.Duration
	// BodyIdleTimeout and BodyTimeout bound the reading of each request
	// body (serve.BodyLimits): zero takes serve.DefaultBodyIdleTimeout and
	// serve.DefaultBodyTimeout, negative turns the bound off. A body that
	// stalls past them is answered 408 and its relay closed.
	BodyIdleTimeout, BodyTimeout time.Duration
	// MaxUploadBytes bounds one envd file upload, answered 413 past it;
	// MaxConcurrentUploads bounds a sandbox's uploads in flight, answered
	// 429 past it. Zero takes the Default* value, negative turns the
	// bound off.
	MaxUploadBytes       int64
	MaxConcurrentUploads int

	// Observer is told every request's status, every relay dial and the
	// bytes relays carry (the metrics package's DataPlane); nil observes
	// nothing.
	Observer Observer
	// Clock times the cache, the lookup budget, the access log and relay
	// dials; nil is the real clock. Tests inject a fake one.
	Clock clock.PassiveClock
	// Ready, when set, makes /healthz answer 503 until it reports true
	// (e.g. until the inventory informer has synced).
	Ready func() bool
	// HTTPClient carries node API calls (claim-token reads); default the
	// sandboxd client's shared one. Guest traffic never uses it.
	HTTPClient *http.Client
}

func (c *Config) applyDefaults() error {
	if c.Locator == nil {
		return errors.New("envdproxy: Locator is required")
	}
	d, err := NormalizeDomain(c.Domain)
	if err != nil {
		return err
	}
	c.Domain = d
	if len(c.Secret) == 0 {
		return errors.New("envdproxy: Secret (the envd secret) is required")
	}
	if c.Token == "" {
		return errors.New("envdproxy: Token (the fleet sandboxd api_token) is required")
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.CacheTTL == 0 {
		c.CacheTTL = DefaultCacheTTL
	}
	if c.LookupRate == 0 {
		c.LookupRate = DefaultLookupRate
	}
	if c.LookupBurst == 0 {
		c.LookupBurst = DefaultLookupBurst
	}
	if c.LookupTimeout == 0 {
		c.LookupTimeout = DefaultLookupTimeout
	}
	if c.MaxUploadBytes == 0 {
		c.MaxUploadBytes = DefaultMaxUploadBytes
	}
	if c.MaxConcurrentUploads == 0 {
		c.MaxConcurrentUploads = DefaultMaxConcurrentUploads
	}
	if c.CacheTTL < 0 || c.LookupRate < 0 || c.LookupBurst < 0 || c.LookupTimeout < 0 {
		return errors.New("envdproxy: CacheTTL, LookupRate, LookupBurst and LookupTimeout must not be negative")
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Observer == nil {
		c.Observer = unobserved{}
	}
	return nil
}

// Protocols is what the proxy's http.Server offers clients: HTTP/1.1, and
// HTTP/2 both over TLS and in the clear (prior knowledge), so ConnectRPC
// keeps working behind an edge that already terminated TLS.
func Protocols() *http.Protocols {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetHTTP2(true)
	p.SetUnencryptedHTTP2(true)
	return p
}
