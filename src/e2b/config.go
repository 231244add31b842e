package e2b

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/e2b/buildstore"
	"github.com/cocoonstack/sandbox-operator/src/e2b/catalog"
	"github.com/cocoonstack/sandbox-operator/src/metrics"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Config is a validated surface configuration (see Options.Config).
type Config struct {
	// Namespace is where a key that names none, and an anonymous caller,
	// claims.
	Namespace string
	// Domain is returned as every sandbox's domain.
	Domain string
	// EnvdVersion is reported to the SDK; DefaultEnvdVersion when empty.
	EnvdVersion string
	// DefaultTimeout is the lease of a create without a timeout and of a
	// refresh; DefaultTimeoutSeconds when zero.
	DefaultTimeout time.Duration
	// Keys are the accepted API keys. Required unless AllowAnonymous.
	Keys APIKeys
	// AllowAnonymous serves callers without a key, in Namespace.
	AllowAnonymous bool
	// Aliases maps template aliases to pool images and sizes. The
	// DefaultAliases are added for names it leaves out.
	Aliases map[string]Template
	// EnvdSecret keys every envd access token. Required.
	EnvdSecret []byte

	// Builds serves the template build API; nil serves none.
	Builds *BuildConfig

	// Optional tuning; zero values take the defaults.

	// MaxTracked bounds the sandboxes whose metadata this process keeps.
	MaxTracked int
	// RetryAfterSeconds is the hint sent with a 429 (drained pool).
	RetryAfterSeconds int
	// RequestTimeout bounds the fleet work of one request.
	RequestTimeout time.Duration
	// InitTimeout bounds the envd /init call that hands over env vars.
	InitTimeout time.Duration
	// CreateRate is how many creates per second one client (an API key;
	// an anonymous caller's source address) sustains, and CreateBurst how
	// many it may make at once beyond that. MaxSandboxes caps the live
	// (running or paused) sandboxes of a key's namespace, or of an
	// anonymous source. Zero takes DefaultCreateRate, DefaultCreateBurst
	// and DefaultMaxSandboxes; a negative CreateRate or MaxSandboxes lifts
	// that bound.
	CreateRate   float64
	CreateBurst  int
	MaxSandboxes int
	// MaxSnapshots caps the snapshots one namespace keeps across the
	// fleet (each copies a sandbox's disk); a snapshot beyond answers
	// 429. Zero takes DefaultMaxSnapshots, negative lifts it.
	MaxSnapshots int
	// MaxSnapshotBytes bounds the bytes a namespace's snapshots may hold;
	// a snapshot that could take it past answers 413. sandboxd reports no
	// checkpoint's size, so each counts at the most it can hold: its size
	// tier's disk (sandbox.SizeTier.DiskMiB). Zero takes
	// DefaultMaxSnapshotBytes, negative lifts it.
	MaxSnapshotBytes int64
	// Refusals counts the requests the surface refuses, by reason; nil
	// counts nothing.
	Refusals *metrics.Refusals
	// Lists times the sandbox lists the surface answers; nil times none.
	Lists *metrics.Lists
	// Clock is the process clock (the create rate's too); default the
	// real one.
	Clock clock.PassiveClock
	// Logger logs; default slog.Default().
	Logger *slog.Logger
}

// DefaultAliases are the aliases a server serves without an alias file
// naming them: code-interpreter-v1, @e2b/code-interpreter's default
// template, is sandboxd's e2b-ci image, the name its nodes give it. A
// create through a default alias whose image no node pools is 404, as for
// any template nobody serves, never a wait for capacity that cannot come.
var DefaultAliases = map[string]Template{
	CodeInterpreterAlias: {Image: CodeInterpreterImage, Size: sandbox.DefaultSize},
}

// The code interpreter's default alias and the image behind it.
const (
	CodeInterpreterAlias = "code-interpreter-v1"
	CodeInterpreterImage = "e2b-ci:latest"
)

// Defaults of Config's tuning fields.
const (
	DefaultMaxTracked        = 100000
	DefaultRetryAfterSeconds = 1
	DefaultRequestTimeout    = 60 * time.Second
	DefaultInitTimeout       = 15 * time.Second

	// The create bounds are far above what an SDK user does by hand or
	// in a test suite (a few creates a second, tens at once) and far
	// below what exhausts a fleet: a client creating flat out gets 30
	// sandboxes, then 5 a second, and never more than 100 live.
	DefaultCreateRate   = 5.0
	DefaultCreateBurst  = 30
	DefaultMaxSandboxes = 100

	// DefaultMaxSnapshots is far above the handful of snapshots an SDK
	// user keeps per sandbox, and far below what fills a node's disk with
	// copies of writable layers.
	DefaultMaxSnapshots = 50

	// DefaultMaxSnapshotBytes is 100 GiB: fifty snapshots of small
	// sandboxes, six of xlarge ones.
	DefaultMaxSnapshotBytes = 100 << 30
)

// BuildConfig configures the template build API (--e2b-builds*).
type BuildConfig struct {
	// Parallel, Timeout and LogLines bound the builds (see build.Config);
	// zero takes the defaults.
	Parallel int
	Timeout  time.Duration
	LogLines int
	// Store keeps the archives COPY steps upload. Required.
	Store buildstore.Store
	// Uploads serves the store's own signed PUTs under /e2b-files/ (the
	// directory store); nil when the store hands out URLs elsewhere (S3).
	Uploads http.Handler
	// MaxUploadFiles and MaxUploadBytes bound the archives one
	// namespace's templates keep in Store (an upload beyond answers
	// 413). Zero takes DefaultBuildUploadMaxFiles and
	// DefaultBuildUploadMaxTotal, negative lifts the bound.
	MaxUploadFiles int
	MaxUploadBytes int64
	// Observer hears how builds end and how many wait and run (the
	// process's metrics.Builds); nil hears nothing.
	Observer build.Observer
}

// Template is what an alias resolves to: a pool image and a size.
type Template struct {
	Image string
	Size  string
}

// APIKeys maps SHA-256 digests of accepted keys to their namespaces. A key
// is looked up by its digest, so the lookup time does not depend on how
// much of a presented key matches a real one, and keys are never kept in
// the clear.
type APIKeys struct {
	byDigest map[[sha256.Size]byte]string
}

// Len is how many keys are accepted.
func (k APIKeys) Len() int { return len(k.byDigest) }

// Namespace returns the namespace of key, if key is accepted.
func (k APIKeys) Namespace(key string) (string, bool) {
	ns, _, ok := k.lookup(key)
	return ns, ok
}

// lookup is Namespace that also returns the key's digest, which names the
// key wherever it must be told apart (its create rate) without keeping it.
func (k APIKeys) lookup(key string) (string, [sha256.Size]byte, bool) {
	if key == "" || k.byDigest == nil {
		return "", [sha256.Size]byte{}, false
	}
	d := sha256.Sum256([]byte(key))
	ns, ok := k.byDigest[d]
	return ns, d, ok
}

// ParseAPIKeys parses a key file: one key per line, optionally followed by
// the namespace it claims in (defaultNamespace otherwise). Blank lines and
// lines starting with # are skipped. Errors name the line number, never
// the key.
func ParseAPIKeys(data []byte, defaultNamespace string) (APIKeys, error) {
	keys := APIKeys{byDigest: map[[sha256.Size]byte]string{}}
	err := eachLine(data, func(n int, fields []string) error {
		if len(fields) > 2 {
			return fmt.Errorf("line %d: want 'key' or 'key namespace', got %d fields", n, len(fields))
		}
		ns := defaultNamespace
		if len(fields) == 2 {
			ns = fields[1]
		}
		if err := validNamespace(ns); err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		d := sha256.Sum256([]byte(fields[0]))
		if prev, dup := keys.byDigest[d]; dup && prev != ns {
			return fmt.Errorf("line %d: the key is listed earlier with another namespace", n)
		}
		keys.byDigest[d] = ns
		return nil
	})
	if err != nil {
		return APIKeys{}, err
	}
	if len(keys.byDigest) == 0 {
		return APIKeys{}, errors.New("no keys in the file")
	}
	return keys, nil
}

// ParseAliases parses an alias file: one 'alias pool-image [size]' per
// line; size defaults to small. Blank lines and # comments are skipped.
func ParseAliases(data []byte) (map[string]Template, error) {
	out := map[string]Template{}
	err := eachLine(data, func(n int, fields []string) error {
		if len(fields) < 2 || len(fields) > 3 {
			return fmt.Errorf("line %d: want 'alias pool-image [size]', got %d fields", n, len(fields))
		}
		t := Template{Image: fields[1], Size: sandbox.DefaultSize}
		if len(fields) == 3 {
			t.Size = fields[2]
		}
		// A create is refused an id the surface would not accept from a
		// caller; an alias file is held to the same rules, so no alias
		// is unreachable and no entry smuggles in what a create may not.
		for _, f := range []struct{ what, v string }{{"alias", fields[0]}, {"pool image", t.Image}, {"size", t.Size}} {
			if err := catalog.ValidTemplateID(f.v); err != nil {
				return fmt.Errorf("line %d: invalid %s: %w", n, f.what, err)
			}
		}
		if _, dup := out[fields[0]]; dup {
			return fmt.Errorf("line %d: alias %q is defined twice", n, fields[0])
		}
		out[fields[0]] = t
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// eachLine calls fn with the whitespace-separated fields of every line
// that is neither blank nor a # comment, and its 1-based number.
func eachLine(data []byte, fn func(n int, fields []string) error) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), maxListFileBytes)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if err := fn(n, strings.Fields(line)); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("line %d: %w", n+1, err)
	}
	return nil
}

func validNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("invalid namespace %q: %s", ns, strings.Join(errs, "; "))
	}
	return nil
}

// withDefaults validates cfg and fills its zero values.
func (c Config) withDefaults() (Config, error) {
	aliases := make(map[string]Template, len(c.Aliases)+len(DefaultAliases))
	for name, t := range DefaultAliases {
		aliases[name] = t
	}
	for name, t := range c.Aliases {
		aliases[name] = t
	}
	c.Aliases = aliases
	if c.Domain == "" {
		return c, errors.New("e2b: Config.Domain is required")
	}
	if len(c.EnvdSecret) == 0 {
		return c, errors.New("e2b: Config.EnvdSecret is required")
	}
	if c.Keys.Len() == 0 && !c.AllowAnonymous {
		return c, errors.New("e2b: Config.Keys is required unless AllowAnonymous")
	}
	if c.Builds != nil && c.Builds.Store == nil {
		return c, errors.New("e2b: Config.Builds needs a Store")
	}
	if c.Namespace == "" {
		c.Namespace = DefaultNamespace
	}
	if err := validNamespace(c.Namespace); err != nil {
		return c, fmt.Errorf("e2b: Config.Namespace: %w", err)
	}
	if c.EnvdVersion == "" {
		c.EnvdVersion = DefaultEnvdVersion
	}
	if c.DefaultTimeout <= 0 {
		c.DefaultTimeout = DefaultTimeoutSeconds * time.Second
	}
	if c.MaxTracked <= 0 {
		c.MaxTracked = DefaultMaxTracked
	}
	if c.RetryAfterSeconds <= 0 {
		c.RetryAfterSeconds = DefaultRetryAfterSeconds
	}
	if c.RequestTimeout <= 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.InitTimeout <= 0 {
		c.InitTimeout = DefaultInitTimeout
	}
	if c.CreateRate == 0 {
		c.CreateRate = DefaultCreateRate
	}
	if c.CreateBurst <= 0 {
		c.CreateBurst = DefaultCreateBurst
	}
	if c.MaxSandboxes == 0 {
		c.MaxSandboxes = DefaultMaxSandboxes
	}
	if c.MaxSnapshots == 0 {
		c.MaxSnapshots = DefaultMaxSnapshots
	}
	if c.MaxSnapshotBytes == 0 {
		c.MaxSnapshotBytes = DefaultMaxSnapshotBytes
	}
	if c.Builds != nil {
		b := *c.Builds
		if b.MaxUploadFiles == 0 {
			b.MaxUploadFiles = DefaultBuildUploadMaxFiles
		}
		if b.MaxUploadBytes == 0 {
			b.MaxUploadBytes = DefaultBuildUploadMaxTotal
		}
		c.Builds = &b
	}
	if c.Clock == nil {
		c.Clock = clock.RealClock{}
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c, nil
}
