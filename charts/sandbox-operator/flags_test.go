package chart_test

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/server"
	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// apiserverFlags is the sandbox-apiserver command line as far as its option
// sets are importable: the generic apiserver's recommended options, the
// sandboxd token, the inventory window and the e2b surface's --e2b-* flags
// are the real registrations; the flags package main defines itself
// (--enable-warm-pool-driver, --enable-e2b-api, ...) are declared here.
// TestRenderedArgsAcceptedByTheBinaries checks the same args against the
// real binaries.
func apiserverFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("sandbox-apiserver", pflag.ContinueOnError)
	server.NewRecommendedOptions().AddFlags(fs)
	(&sandboxd.TokenOptions{}).AddFlags(fs)
	inventory.AddFlags(fs, inventory.NewOptions())
	e2b.NewOptions().AddFlags(fs)

	// package main (src/cmd/sandbox-apiserver).
	fs.Bool("enable-warm-pool-driver", true, "")
	fs.Duration("warm-pool-sync-interval", 0, "")
	fs.Bool("enable-e2b-api", false, "")
	fs.Duration("shutdown-delay", 0, "")
	fs.String("peer-bind-address", "", "")
	fs.StringSlice("peers", nil, "")
	fs.String("peer-service", "", "")
	fs.Duration("peer-timeout", 0, "")

	return fs
}

// proxyFlags is sandbox-envd-proxy's command line per the configuration
// reference, except --inventory-stale-after, which is the shared
// registration every inventory reader uses.
func proxyFlags() *pflag.FlagSet {
	fs := pflag.NewFlagSet("sandbox-envd-proxy", pflag.ContinueOnError)
	for _, name := range []string{
		"bind-address", "domain", "namespace", "tls-cert-file", "tls-private-key-file",
		"e2b-envd-secret-file", "metrics-bind-address",
	} {
		fs.String(name, "", "")
	}
	fs.Bool("guest-http2", false, "")
	fs.Duration("shutdown-delay", 0, "")
	(&sandboxd.TokenOptions{}).AddFlags(fs)
	inventory.AddFlags(fs, inventory.NewOptions())
	return fs
}

// TestRenderedArgsParse parses every rendered Deployment's args with its
// binary's flag set: an unknown flag, or a value of the wrong type, fails.
func TestRenderedArgsParse(t *testing.T) {
	flagSets := map[string]func() *pflag.FlagSet{
		"sandbox-apiserver":  apiserverFlags,
		"sandbox-envd-proxy": proxyFlags,
	}
	for name, sets := range scenarios {
		t.Run(name, func(t *testing.T) {
			for _, o := range mustRender(t, sets...) {
				if o.u.GetKind() != "Deployment" {
					continue
				}
				newFS, ok := flagSets[o.u.GetName()]
				if !ok {
					t.Fatalf("no flag set for Deployment %s", o.u.GetName())
				}
				args, _, _ := unstructured.NestedStringSlice(container(t, o.u), "args")
				fs := newFS()
				fs.SetOutput(discard{})
				if err := fs.Parse(args); err != nil {
					t.Errorf("%s args %q: %v", o.u.GetName(), args, err)
				}
				if fs.NArg() != 0 {
					t.Errorf("%s has positional args %v", o.u.GetName(), fs.Args())
				}
				for _, a := range args {
					if !strings.HasPrefix(a, "--") || !strings.Contains(a, "=") {
						t.Errorf("%s arg %q is not --flag=value", o.u.GetName(), a)
					}
				}
			}
		})
	}
}

// TestRenderedArgsCarryTheValues spot-checks that values reach the flags
// the configuration reference maps them to.
func TestRenderedArgsCarryTheValues(t *testing.T) {
	objs := mustRender(t, scenarios["e2b-full"]...)
	api := apiserverFlags()
	api.SetOutput(discard{})
	args, _, _ := unstructured.NestedStringSlice(container(t, find(t, objs, "Deployment", "sandbox-apiserver")), "args")
	if err := api.Parse(args); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"secure-port":             "6443",
		"enable-warm-pool-driver": "true",
		"enable-e2b-api":          "true",
		"e2b-bind-address":        ":8080",
		"e2b-domain":              "sandbox.example.com",
		"e2b-namespace":           "default",
		"e2b-envd-version":        "0.8.1",
		"e2b-default-timeout":     "600",
		"e2b-create-rate":         "2.5",
		"e2b-create-burst":        "10",
		"e2b-max-sandboxes":       "0",
		"e2b-max-snapshots":       "7",
		"e2b-max-snapshot-bytes":  "1073741824",
		"sandboxd-token-file":     "/var/run/sandbox-apiserver/sandboxd-token/token",
		"inventory-stale-after":   (90 * time.Second).String(),
	} {
		if got := api.Lookup(flag).Value.String(); got != want {
			t.Errorf("sandbox-apiserver --%s = %q, want %q", flag, got, want)
		}
	}
	if !api.Lookup("e2b-template-alias-file").Changed || !api.Lookup("tls-cert-file").Changed {
		t.Error("template alias file or TLS cert not passed")
	}

	proxy := proxyFlags()
	proxy.SetOutput(discard{})
	args, _, _ = unstructured.NestedStringSlice(container(t, find(t, objs, "Deployment", "sandbox-envd-proxy")), "args")
	if err := proxy.Parse(args); err != nil {
		t.Fatal(err)
	}
	for flag, want := range map[string]string{
		"bind-address":         ":8443",
		"domain":               "sandbox.example.com",
		"namespace":            "team-a",
		"tls-cert-file":        "/var/run/sandbox-envd-proxy/tls/tls.crt",
		"tls-private-key-file": "/var/run/sandbox-envd-proxy/tls/tls.key",
		"e2b-envd-secret-file": "/var/run/sandbox-envd-proxy/envd-secret/secret",
		"sandboxd-token-file":  "/var/run/sandbox-envd-proxy/sandboxd-token/token",
	} {
		if got := proxy.Lookup(flag).Value.String(); got != want {
			t.Errorf("sandbox-envd-proxy --%s = %q, want %q", flag, got, want)
		}
	}

	// The chart's "every namespace" default must be passed explicitly: the
	// binary's own default is "default".
	objs = mustRender(t, e2bSets...)
	args, _, _ = unstructured.NestedStringSlice(container(t, find(t, objs, "Deployment", "sandbox-envd-proxy")), "args")
	proxy = proxyFlags()
	if err := proxy.Parse(args); err != nil {
		t.Fatal(err)
	}
	if f := proxy.Lookup("namespace"); !f.Changed || f.Value.String() != "" {
		t.Errorf("proxy --namespace changed=%v value=%q, want an explicit empty value", f.Changed, f.Value.String())
	}
	if got := proxy.Lookup("domain").Value.String(); got != "sandbox.example.com" {
		t.Errorf("proxy --domain = %q, want the fallback to apiserver.e2b.domain", got)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }

// TestRenderedArgsAcceptedByTheBinaries hands every rendered Deployment's
// args to the real binary, with --help: the binary parses every flag
// before it prints its help, so an unknown flag or a malformed value exits
// non-zero. This covers the flags package main defines, which the flag sets
// above only declare.
func TestRenderedArgsAcceptedByTheBinaries(t *testing.T) {
	binaries := map[string]string{
		"sandbox-apiserver":  testbin.Path(t, "SANDBOX_APISERVER", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-apiserver"),
		"sandbox-envd-proxy": testbin.Path(t, "SANDBOX_ENVD_PROXY", "github.com/cocoonstack/sandbox-operator/src/cmd/sandbox-envd-proxy"),
	}
	for name, sets := range scenarios {
		t.Run(name, func(t *testing.T) {
			for _, o := range mustRender(t, sets...) {
				if o.u.GetKind() != "Deployment" {
					continue
				}
				binary, ok := binaries[o.u.GetName()]
				if !ok {
					t.Fatalf("no binary for Deployment %s", o.u.GetName())
				}
				args, _, _ := unstructured.NestedStringSlice(container(t, o.u), "args")
				cmd := exec.Command(binary, append(args, "--help")...)
				cmd.Env = []string{"OPERATOR_LOG_LEVEL=error"}
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s %q --help: %v\n%s", o.u.GetName(), args, err, lastLines(string(out), 5))
				}
			}
		})
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// buildFlagSet is exactly what BuildOptions.AddFlags registers.
func buildFlagSet() (*pflag.FlagSet, *e2b.BuildOptions) {
	fs := pflag.NewFlagSet("builds", pflag.ContinueOnError)
	fs.SetOutput(discard{})
	o := e2b.NewBuildOptions()
	o.AddFlags(fs)
	return fs, &o
}

// TestChartCoversEveryBuildFlag: every flag BuildOptions registers is one
// the apiserver's command line has and one the chart renders with one store
// or the other, so a new build flag fails here until the chart maps it; and
// the chart's defaults are the binary's.
func TestChartCoversEveryBuildFlag(t *testing.T) {
	fs, _ := buildFlagSet()
	var registered []string
	fs.VisitAll(func(f *pflag.Flag) { registered = append(registered, f.Name) })
	if len(registered) == 0 {
		t.Fatal("BuildOptions registers no flag")
	}
	api := apiserverFlags()
	for _, name := range registered {
		if api.Lookup(name) == nil {
			t.Errorf("--%s is not on the apiserver's command line (e2b.Options.AddFlags)", name)
		}
	}

	rendered := map[string]bool{}
	for _, sets := range [][]string{buildsDirSets, buildsS3Sets} {
		fs, _ := buildFlagSet()
		if err := fs.Parse(buildArgs(apiserverArgs(t, mustRender(t, sets...)))); err != nil {
			t.Fatalf("the rendered build args do not parse with BuildOptions' flags: %v", err)
		}
		fs.Visit(func(f *pflag.Flag) { rendered[f.Name] = true })
	}
	for _, name := range registered {
		if !rendered[name] {
			t.Errorf("--%s is registered by BuildOptions but the chart never renders it", name)
		}
	}

	// The defaults the chart passes explicitly are the binary's own.
	fs, got := buildFlagSet()
	if err := fs.Parse(buildArgs(apiserverArgs(t, mustRender(t, buildsDirSets...)))); err != nil {
		t.Fatal(err)
	}
	want := e2b.NewBuildOptions()
	if got.Parallel != want.Parallel || got.Timeout != want.Timeout || got.LogLines != want.LogLines || got.UploadMax != want.UploadMax {
		t.Errorf("chart defaults parallel=%d timeout=%s logLines=%d uploadMax=%d, binary defaults %d %s %d %d",
			got.Parallel, got.Timeout, got.LogLines, got.UploadMax, want.Parallel, want.Timeout, want.LogLines, want.UploadMax)
	}
	if !got.Enabled || got.Dir != defaultBuildDir || got.S3Bucket != "" {
		t.Errorf("dir store parsed as %+v", *got)
	}

	// And the S3 values land in the S3 options.
	fs, got = buildFlagSet()
	if err := fs.Parse(buildArgs(apiserverArgs(t, mustRender(t, buildsS3Sets...)))); err != nil {
		t.Fatal(err)
	}
	if got.Dir != "" || got.S3Bucket != "template-files" || got.S3Prefix != "prod" ||
		got.S3Endpoint != "https://minio.example.com" || got.S3Region != "eu-west-1" || !got.S3ForcePathStyle ||
		got.Timeout != 30*time.Minute {
		t.Errorf("S3 store parsed as %+v", *got)
	}
}
