package e2b

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"time"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
)

// Defaults of the surface's flags.
const (
	DefaultBindAddress = ":8080"
	DefaultNamespace   = "default"
	// DefaultEnvdVersion is reported when --e2b-envd-version is empty; it
	// is the envd release the e2b-rt image ships.
	DefaultEnvdVersion = "0.8.0"
	// DefaultTimeoutSeconds is the lease of a create that names no timeout
	// when --e2b-default-timeout is 0.
	DefaultTimeoutSeconds = 300

	// maxListFileBytes bounds the key and alias files: they are a few
	// lines each, and a mistaken path must not be read whole.
	maxListFileBytes = 1 << 20
)

// Options are the surface's command-line flags. sandbox-apiserver adds
// --enable-e2b-api itself and builds a Config from these only when it is
// set.
type Options struct {
	BindAddress       string
	Namespace         string
	Domain            string
	EnvdVersion       string
	DefaultTimeout    int
	APIKeyFile        string
	AllowAnonymous    bool
	TemplateAliasFile string
	EnvdSecretFile    string
	CreateRate        float64
	CreateBurst       int
	MaxSandboxes      int
	MaxSnapshots      int
	MaxSnapshotBytes  int64
	Build             BuildOptions
}

// NewOptions returns the flag defaults.
func NewOptions() *Options {
	return &Options{
		BindAddress: DefaultBindAddress, Namespace: DefaultNamespace,
		CreateRate: DefaultCreateRate, CreateBurst: DefaultCreateBurst, MaxSandboxes: DefaultMaxSandboxes,
		MaxSnapshots: DefaultMaxSnapshots, MaxSnapshotBytes: DefaultMaxSnapshotBytes,
		Build: NewBuildOptions(),
	}
}

// AddFlags registers every --e2b-* flag but --enable-e2b-api.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.BindAddress, "e2b-bind-address", o.BindAddress,
		"Address the e2b-compatible surface listens on.")
	fs.StringVar(&o.Namespace, "e2b-namespace", o.Namespace,
		"Namespace a key that names none claims in, and where anonymous claims land; e2b has no namespace concept.")
	fs.StringVar(&o.Domain, "e2b-domain", o.Domain,
		"Base domain the SDK derives the in-sandbox envd host from, as {port}-{sandboxID}.{domain}. Required whenever the surface is served.")
	fs.StringVar(&o.EnvdVersion, "e2b-envd-version", o.EnvdVersion,
		"envd version reported to the SDK (0.8.0 when empty). It must name the envd installed in the pool's image: the SDK version-compares it.")
	fs.IntVar(&o.DefaultTimeout, "e2b-default-timeout", o.DefaultTimeout,
		"Lease in seconds granted to a create that names no timeout, and the lease an SDK refresh renews for (300 when 0).")
	fs.StringVar(&o.APIKeyFile, "e2b-api-key-file", o.APIKeyFile,
		"Path to a file (Secret mount) of accepted e2b API keys, one per line as 'key' or 'key namespace', presented by the SDK as X-API-KEY; a key sees only its namespace's sandboxes and snapshots (--e2b-namespace when none is given).")
	fs.BoolVar(&o.AllowAnonymous, "e2b-allow-anonymous", o.AllowAnonymous,
		"Serve the e2b surface with NO API key. Development only: it leaves the claim endpoint open to anyone who can reach the port.")
	fs.StringVar(&o.TemplateAliasFile, "e2b-template-alias-file", o.TemplateAliasFile,
		"Path to a file of e2b template aliases, one per line as 'alias pool-image [size]' (size small when none is given), so a create naming the alias (the SDK's default is base) claims from that image's pool.")
	fs.StringVar(&o.EnvdSecretFile, "e2b-envd-secret-file", o.EnvdSecretFile,
		"Path to a file (Secret mount) holding the key every sandbox's envd access token derives from; the e2b surface and the envd-proxy must read the same one. Required with --enable-e2b-api.")
	fs.Float64Var(&o.CreateRate, "e2b-create-rate", o.CreateRate,
		"Sandbox creates per second one API key (an anonymous caller: one source address) may sustain; more answer 429. 0 lifts the limit.")
	fs.IntVar(&o.CreateBurst, "e2b-create-burst", o.CreateBurst,
		"Sandbox creates one API key (an anonymous caller: one source address) may make at once before --e2b-create-rate applies.")
	fs.IntVar(&o.MaxSandboxes, "e2b-max-sandboxes", o.MaxSandboxes,
		"Most live (running or paused) sandboxes an API key's namespace (an anonymous caller: one source address) may hold; a create beyond answers 429. 0 lifts the cap.")
	fs.IntVar(&o.MaxSnapshots, "e2b-max-snapshots", o.MaxSnapshots,
		"Most snapshots an API key's namespace may keep across the fleet; a snapshot beyond answers 429. 0 lifts the cap.")
	fs.Int64Var(&o.MaxSnapshotBytes, "e2b-max-snapshot-bytes", o.MaxSnapshotBytes,
		"Most bytes an API key's namespace's snapshots may hold, each counted at its size tier's disk (sandboxd reports no snapshot's size); a snapshot that could pass it answers 413. 0 lifts the bound.")
	o.Build.AddFlags(fs)
}

// Config validates the options and reads the files they name. Each error
// names the flag that fixes it.
func (o *Options) Config() (Config, error) {
	if o.Domain == "" {
		return Config{}, errors.New("--e2b-domain is required with --enable-e2b-api: without it a created sandbox has no reachable data plane")
	}
	if o.EnvdSecretFile == "" {
		return Config{}, errors.New("--e2b-envd-secret-file is required with --enable-e2b-api: the envd access tokens derive from it")
	}
	if o.APIKeyFile == "" && !o.AllowAnonymous {
		return Config{}, errors.New("set --e2b-api-key-file (or, for development only, --e2b-allow-anonymous): the e2b surface refuses to serve without API keys")
	}
	if o.DefaultTimeout < 0 {
		return Config{}, fmt.Errorf("--e2b-default-timeout must not be negative, got %d", o.DefaultTimeout)
	}
	if o.CreateRate < 0 || math.IsNaN(o.CreateRate) || math.IsInf(o.CreateRate, 0) {
		return Config{}, fmt.Errorf("--e2b-create-rate must be a finite number not below 0, got %v", o.CreateRate)
	}
	if o.CreateRate > 0 && o.CreateBurst < 1 {
		return Config{}, fmt.Errorf("--e2b-create-burst must be at least 1 while --e2b-create-rate is set, got %d", o.CreateBurst)
	}
	if o.MaxSandboxes < 0 {
		return Config{}, fmt.Errorf("--e2b-max-sandboxes must not be negative, got %d", o.MaxSandboxes)
	}
	if o.MaxSnapshots < 0 {
		return Config{}, fmt.Errorf("--e2b-max-snapshots must not be negative, got %d", o.MaxSnapshots)
	}
	if o.MaxSnapshotBytes < 0 {
		return Config{}, fmt.Errorf("--e2b-max-snapshot-bytes must not be negative, got %d", o.MaxSnapshotBytes)
	}
	if o.BindAddress == "" {
		return Config{}, errors.New("--e2b-bind-address must not be empty")
	}
	if err := validNamespace(o.Namespace); err != nil {
		return Config{}, fmt.Errorf("--e2b-namespace: %w", err)
	}
	secret, err := envdtoken.ReadSecretFile(o.EnvdSecretFile)
	if err != nil {
		return Config{}, fmt.Errorf("--e2b-envd-secret-file: %w", err)
	}
	cfg := Config{
		Namespace:        o.Namespace,
		Domain:           o.Domain,
		EnvdVersion:      o.EnvdVersion,
		DefaultTimeout:   time.Duration(o.DefaultTimeout) * time.Second,
		AllowAnonymous:   o.AllowAnonymous,
		EnvdSecret:       secret,
		CreateRate:       o.CreateRate,
		CreateBurst:      o.CreateBurst,
		MaxSandboxes:     o.MaxSandboxes,
		MaxSnapshots:     o.MaxSnapshots,
		MaxSnapshotBytes: o.MaxSnapshotBytes,
	}
	// A flag's 0 lifts its bound; Config's 0 takes the default.
	if cfg.CreateRate == 0 {
		cfg.CreateRate = -1
	}
	if cfg.MaxSandboxes == 0 {
		cfg.MaxSandboxes = -1
	}
	if cfg.MaxSnapshots == 0 {
		cfg.MaxSnapshots = -1
	}
	if cfg.MaxSnapshotBytes == 0 {
		cfg.MaxSnapshotBytes = -1
	}
	if cfg.Builds, err = o.Build.Config(secret); err != nil {
		return Config{}, err
	}
	if o.APIKeyFile != "" {
		raw, err := readListFile(o.APIKeyFile)
		if err != nil {
			return Config{}, fmt.Errorf("--e2b-api-key-file: %w", err)
		}
		keys, err := ParseAPIKeys(raw, o.Namespace)
		if err != nil {
			return Config{}, fmt.Errorf("--e2b-api-key-file %s: %w", o.APIKeyFile, err)
		}
		cfg.Keys = keys
	}
	if o.TemplateAliasFile != "" {
		raw, err := readListFile(o.TemplateAliasFile)
		if err != nil {
			return Config{}, fmt.Errorf("--e2b-template-alias-file: %w", err)
		}
		aliases, err := ParseAliases(raw)
		if err != nil {
			return Config{}, fmt.Errorf("--e2b-template-alias-file %s: %w", o.TemplateAliasFile, err)
		}
		cfg.Aliases = aliases
	}
	return cfg, nil
}

func readListFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, maxListFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(buf) > maxListFileBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxListFileBytes)
	}
	return buf, nil
}
