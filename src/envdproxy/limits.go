package envdproxy

import (
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// Limits are the data plane's bounds on request bodies and envd uploads
// as a command line sets them. Unlike Config, where zero means the
// default, zero here turns a bound off: a flag shows its default.
type Limits struct {
	BodyIdleTimeout      time.Duration
	BodyTimeout          time.Duration
	MaxUploadBytes       int64
	MaxConcurrentUploads int
	MaxConnsPerClient    int
}

// DefaultLimits are the flags' defaults.
func DefaultLimits() Limits {
	return Limits{
		BodyIdleTimeout:      serve.DefaultBodyIdleTimeout,
		BodyTimeout:          serve.DefaultBodyTimeout,
		MaxUploadBytes:       DefaultMaxUploadBytes,
		MaxConcurrentUploads: DefaultMaxConcurrentUploads,
		MaxConnsPerClient:    serve.DefaultMaxConnsPerClient,
	}
}

// AddFlags registers the five flags, each name prefixed with prefix
// ("" for sandbox-envd-proxy, "envd-proxy-" for sandbox-e2b).
func (l *Limits) AddFlags(fs *pflag.FlagSet, prefix string) {
	fs.DurationVar(&l.BodyIdleTimeout, prefix+"body-idle-timeout", l.BodyIdleTimeout,
		"Longest a client may leave a request body waiting for its next byte; past it the request is answered 408 and its relay to the sandbox closed. Response streams (command output, pty) and upgraded connections (WebSocket) are not bounded. 0 turns the bound off.")
	fs.DurationVar(&l.BodyTimeout, prefix+"body-timeout", l.BodyTimeout,
		"Longest a whole request body may take to arrive (an upload, at the client's speed); past it the request is answered 408. 0 turns the bound off.")
	fs.Int64Var(&l.MaxUploadBytes, prefix+"max-upload-bytes", l.MaxUploadBytes,
		"Largest envd file upload (POST /files on port 49983) the data plane relays, as sent; a larger one is answered 413. 0 turns the bound off.")
	fs.IntVar(&l.MaxConcurrentUploads, prefix+"max-concurrent-uploads", l.MaxConcurrentUploads,
		"Envd file uploads one sandbox may have in flight at once; the next is answered 429 until one ends. 0 turns the bound off.")
	fs.IntVar(&l.MaxConnsPerClient, prefix+"max-connections-per-client", l.MaxConnsPerClient,
		"Connections one client address may hold open on the data plane at once; one past it is closed unread. Raise it when many clients reach the data plane through one address (an ingress that does not keep connections alive). 0 turns the bound off.")
}

// Validate refuses negative values, naming the flag.
func (l Limits) Validate(prefix string) error {
	switch {
	case l.BodyIdleTimeout < 0:
		return fmt.Errorf("--%sbody-idle-timeout: %v must not be negative (0 turns it off)", prefix, l.BodyIdleTimeout)
	case l.BodyTimeout < 0:
		return fmt.Errorf("--%sbody-timeout: %v must not be negative (0 turns it off)", prefix, l.BodyTimeout)
	case l.MaxUploadBytes < 0:
		return fmt.Errorf("--%smax-upload-bytes: %d must not be negative (0 turns it off)", prefix, l.MaxUploadBytes)
	case l.MaxConcurrentUploads < 0:
		return fmt.Errorf("--%smax-concurrent-uploads: %d must not be negative (0 turns it off)", prefix, l.MaxConcurrentUploads)
	case l.MaxConnsPerClient < 0:
		return fmt.Errorf("--%smax-connections-per-client: %d must not be negative (0 turns it off)", prefix, l.MaxConnsPerClient)
	}
	return nil
}

// off maps the flags' "0 is off" to Config's "negative is off".
func off[T time.Duration | int64 | int](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// Apply sets c's bounds from l.
func (l Limits) Apply(c *Config) {
	c.BodyIdleTimeout = off(l.BodyIdleTimeout)
	c.BodyTimeout = off(l.BodyTimeout)
	c.MaxUploadBytes = off(l.MaxUploadBytes)
	c.MaxConcurrentUploads = off(l.MaxConcurrentUploads)
}

// ApplyServer sets the body and connection bounds of the data plane's
// listener from l, so that they hold for every request it serves, the
// proxy's own answers included.
func (l Limits) ApplyServer(c *serve.ServerConfig) {
	c.BodyIdleTimeout = off(l.BodyIdleTimeout)
	c.BodyTimeout = off(l.BodyTimeout)
	c.MaxConnsPerClient = off(l.MaxConnsPerClient)
}
