package e2b_test

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestFlags(t *testing.T) {
	o := e2b.NewOptions()
	fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
	o.AddFlags(fs)
	for _, name := range []string{
		"e2b-bind-address", "e2b-namespace", "e2b-domain", "e2b-envd-version", "e2b-default-timeout",
		"e2b-api-key-file", "e2b-allow-anonymous", "e2b-template-alias-file", "e2b-envd-secret-file",
		"e2b-create-rate", "e2b-create-burst", "e2b-max-sandboxes",
		"e2b-builds", "e2b-build-parallel", "e2b-build-timeout", "e2b-build-log-lines", "e2b-build-dir",
		"e2b-build-upload-max", "e2b-build-store-s3-bucket", "e2b-build-store-s3-prefix",
		"e2b-build-store-s3-endpoint", "e2b-build-store-s3-region", "e2b-build-store-s3-force-path-style",
	} {
		if fs.Lookup(name) == nil {
			t.Errorf("--%s is not registered", name)
		}
	}
	for _, name := range []string{"enable-e2b-api"} {
		if fs.Lookup(name) != nil {
			t.Errorf("--%s must not be registered here", name)
		}
	}
	if o.BindAddress != ":8080" || o.Namespace != "default" ||
		o.CreateRate != e2b.DefaultCreateRate || o.CreateBurst != e2b.DefaultCreateBurst || o.MaxSandboxes != e2b.DefaultMaxSandboxes {
		t.Errorf("defaults = %+v", o)
	}
}

func TestConfigValidation(t *testing.T) {
	secret := writeFile(t, "secret", "s3cret\n")
	keys := writeFile(t, "keys", "# keys\nk1\n\nk2 team-b\n")
	aliases := writeFile(t, "aliases", "base img:1\nbig img:1 large\n")
	good := func() *e2b.Options {
		o := e2b.NewOptions()
		o.Domain, o.EnvdSecretFile, o.APIKeyFile, o.TemplateAliasFile = "sb.example.com", secret, keys, aliases
		return o
	}
	for name, tc := range map[string]struct {
		mutate func(*e2b.Options)
		want   string
	}{
		"no domain":          {func(o *e2b.Options) { o.Domain = "" }, "--e2b-domain"},
		"no secret":          {func(o *e2b.Options) { o.EnvdSecretFile = "" }, "--e2b-envd-secret-file"},
		"missing secret":     {func(o *e2b.Options) { o.EnvdSecretFile = secret + ".gone" }, "--e2b-envd-secret-file"},
		"empty secret":       {func(o *e2b.Options) { o.EnvdSecretFile = writeFile(t, "empty", " \n") }, "--e2b-envd-secret-file"},
		"no keys, no anon":   {func(o *e2b.Options) { o.APIKeyFile = "" }, "--e2b-api-key-file"},
		"missing key file":   {func(o *e2b.Options) { o.APIKeyFile = keys + ".gone" }, "--e2b-api-key-file"},
		"bad key line":       {func(o *e2b.Options) { o.APIKeyFile = writeFile(t, "k", "ok\nk ns extra\n") }, "line 2"},
		"bad alias line":     {func(o *e2b.Options) { o.TemplateAliasFile = writeFile(t, "a", "# c\n\nlonely\n") }, "line 3"},
		"negative timeout":   {func(o *e2b.Options) { o.DefaultTimeout = -1 }, "--e2b-default-timeout"},
		"bad namespace":      {func(o *e2b.Options) { o.Namespace = "Not_A_Label" }, "--e2b-namespace"},
		"missing alias file": {func(o *e2b.Options) { o.TemplateAliasFile = aliases + ".gone" }, "--e2b-template-alias-file"},
		"bad alias entry":    {func(o *e2b.Options) { o.TemplateAliasFile = writeFile(t, "a", "base ../etc/passwd\n") }, "line 1"},
		"negative rate":      {func(o *e2b.Options) { o.CreateRate = -1 }, "--e2b-create-rate"},
		"infinite rate":      {func(o *e2b.Options) { o.CreateRate = math.Inf(1) }, "--e2b-create-rate"},
		"zero burst":         {func(o *e2b.Options) { o.CreateBurst = 0 }, "--e2b-create-burst"},
		"negative cap":       {func(o *e2b.Options) { o.MaxSandboxes = -1 }, "--e2b-max-sandboxes"},
	} {
		o := good()
		tc.mutate(o)
		_, err := o.Config()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the error shows the secret", name)
		}
	}

	cfg, err := good().Config()
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.EnvdSecret) != "s3cret" || cfg.Domain != "sb.example.com" || cfg.Keys.Len() != 2 || len(cfg.Aliases) != 2 {
		t.Errorf("config = %+v", cfg)
	}
	if ns, ok := cfg.Keys.Namespace("k2"); !ok || ns != "team-b" {
		t.Errorf("k2 → %q %v", ns, ok)
	}
	if ns, ok := cfg.Keys.Namespace("k1"); !ok || ns != "default" {
		t.Errorf("k1 → %q %v", ns, ok)
	}

	// Anonymous without a key file is allowed (development only).
	o := good()
	o.APIKeyFile, o.AllowAnonymous = "", true
	if cfg, err := o.Config(); err != nil || !cfg.AllowAnonymous || cfg.Keys.Len() != 0 {
		t.Errorf("anonymous config = %+v, %v", cfg, err)
	}
	// The server fills the documented defaults.
	o = good()
	o.DefaultTimeout = 0
	cfg, _ = o.Config()
	if cfg.DefaultTimeout != 0 || cfg.EnvdVersion != "" {
		t.Errorf("zero values are kept for the server to default: %+v", cfg)
	}
	// The create bounds pass through; a flag's 0 lifts its bound, which
	// Config spells negative (its 0 is the default).
	if cfg.CreateRate != e2b.DefaultCreateRate || cfg.CreateBurst != e2b.DefaultCreateBurst || cfg.MaxSandboxes != e2b.DefaultMaxSandboxes {
		t.Errorf("create bounds = %v/%d/%d", cfg.CreateRate, cfg.CreateBurst, cfg.MaxSandboxes)
	}
	o = good()
	o.CreateRate, o.CreateBurst, o.MaxSandboxes = 0, 0, 0
	if cfg, err := o.Config(); err != nil || cfg.CreateRate >= 0 || cfg.MaxSandboxes >= 0 {
		t.Errorf("0 flags = %v/%d/%d, %v; want both bounds lifted", cfg.CreateRate, cfg.CreateBurst, cfg.MaxSandboxes, err)
	}
}

func TestParseAPIKeys(t *testing.T) {
	keys, err := e2b.ParseAPIKeys([]byte("  # comment\n\nalpha\n beta  team-b \nalpha\n"), "dflt")
	if err != nil {
		t.Fatal(err)
	}
	if keys.Len() != 2 {
		t.Errorf("len = %d", keys.Len())
	}
	for key, want := range map[string]string{"alpha": "dflt", "beta": "team-b"} {
		if ns, ok := keys.Namespace(key); !ok || ns != want {
			t.Errorf("%s → %q %v, want %q", key, ns, ok, want)
		}
	}
	for _, key := range []string{"", "alph", "alpha ", "Alpha", "team-b"} {
		if _, ok := keys.Namespace(key); ok {
			t.Errorf("%q is accepted", key)
		}
	}
	for name, tc := range map[string]struct{ data, want string }{
		"three fields":   {"a\nb c d\n", "line 2"},
		"bad namespace":  {"\n\nk BAD_NS\n", "line 3"},
		"conflict":       {"k ns1\nk ns2\n", "line 2"},
		"only comments":  {"# nothing\n\n", "no keys"},
		"bad default ns": {"k\n", "line 1"},
	} {
		dflt := "dflt"
		if name == "bad default ns" {
			dflt = "Nope!"
		}
		_, err := e2b.ParseAPIKeys([]byte(tc.data), dflt)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "k ns") {
			t.Errorf("%s: the error quotes a key line", name)
		}
	}
}

func TestParseAliases(t *testing.T) {
	a, err := e2b.ParseAliases([]byte("# aliases\nbase ghcr.io/x/e2b-rt:24.04\n\n big  ghcr.io/x/e2b-rt:24.04  large\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a["base"] != (e2b.Template{Image: "ghcr.io/x/e2b-rt:24.04", Size: "small"}) ||
		a["big"] != (e2b.Template{Image: "ghcr.io/x/e2b-rt:24.04", Size: "large"}) || len(a) != 2 {
		t.Errorf("aliases = %+v", a)
	}
	for name, tc := range map[string]struct{ data, want string }{
		"one field":   {"base img\nlonely\n", "line 2"},
		"four fields": {"# c\na b c d\n", "line 2"},
		"duplicate":   {"a img\n\na img2\n", "line 3"},
	} {
		_, err := e2b.ParseAliases([]byte(tc.data))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", name, err, tc.want)
		}
	}
	if a, err := e2b.ParseAliases(nil); err != nil || len(a) != 0 {
		t.Errorf("empty alias file = %v, %v", a, err)
	}
}

func TestNewServerRequiresTheEssentials(t *testing.T) {
	keys, _ := e2b.ParseAPIKeys([]byte("k\n"), "default")
	base := e2b.Config{Domain: "d", EnvdSecret: []byte("s"), Keys: keys}
	for name, cfg := range map[string]e2b.Config{
		"no domain": {EnvdSecret: []byte("s"), Keys: keys},
		"no secret": {Domain: "d", Keys: keys},
		"no keys":   {Domain: "d", EnvdSecret: []byte("s")},
	} {
		if _, err := e2b.NewServer(cfg, failingFleet{}, nil); err == nil {
			t.Errorf("%s: NewServer accepted it", name)
		}
	}
	if _, err := e2b.NewServer(base, nil, nil); err == nil {
		t.Error("NewServer accepted a nil fleet")
	}
	srv, err := e2b.NewServer(base, failingFleet{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv.Close()
}
