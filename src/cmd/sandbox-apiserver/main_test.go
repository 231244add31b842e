package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
)

func TestUnknownLogLevelFailsStartup(t *testing.T) {
	t.Setenv(logging.LevelEnv, "chatty")
	var stderr bytes.Buffer
	if code := run([]string{"--help"}, io.Discard, &stderr); code != 2 {
		t.Errorf("exit code = %d, want 2", code)
	}
	if !strings.Contains(stderr.String(), `OPERATOR_LOG_LEVEL="chatty"`) {
		t.Errorf("stderr = %q", stderr.String())
	}
}

func TestFlags(t *testing.T) {
	o := newOptions()
	fs := o.flagSet()
	var names []string
	fs.VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	for _, n := range names {
		if strings.HasPrefix(n, "etcd") || strings.Contains(n, "storage-backend") || strings.HasPrefix(n, "watch-cache") {
			t.Errorf("flag --%s exposes storage; the server stores nothing", n)
		}
		if strings.HasPrefix(n, "admission") || n == "enable-admission-plugins" {
			t.Errorf("flag --%s: admission is not configured", n)
		}
	}
	for _, want := range []string{
		"secure-port", "cert-dir", "tls-cert-file", "tls-private-key-file",
		"authentication-kubeconfig", "authorization-kubeconfig", "kubeconfig", "profiling",
		"sandboxd-token", "sandboxd-token-file", "inventory-stale-after",
		"enable-warm-pool-driver", "warm-pool-sync-interval", "name-hold-ttl", "node-timeout",
		"enable-e2b-api", "e2b-bind-address", "e2b-namespace", "e2b-domain", "e2b-envd-version",
		"e2b-default-timeout", "e2b-api-key-file", "e2b-allow-anonymous", "e2b-template-alias-file",
		"e2b-envd-secret-file", "peer-bind-address", "peers", "peer-service", "peer-timeout",
	} {
		if fs.Lookup(want) == nil {
			t.Errorf("flag --%s missing", want)
		}
	}
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	if got := fs.Lookup("secure-port").DefValue; got != "6443" {
		t.Errorf("--secure-port default = %s, want 6443", got)
	}
	if o.enableE2B || o.e2b.BindAddress != ":8080" || o.e2b.Namespace != "default" {
		t.Errorf("e2b defaults: enabled %v, bind %q, namespace %q", o.enableE2B, o.e2b.BindAddress, o.e2b.Namespace)
	}
	if !o.enableWarmPoolDriver || o.inventory.StaleAfter != 90*time.Second {
		t.Errorf("defaults: warm-pool driver %v, stale-after %v", o.enableWarmPoolDriver, o.inventory.StaleAfter)
	}
	if err := o.validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestInvalidFlagsFailStartup(t *testing.T) {
	t.Setenv(logging.LevelEnv, "error")
	for _, args := range [][]string{
		{"--etcd-servers=http://127.0.0.1:2379"},
		{"--inventory-stale-after=0s"},
		{"--warm-pool-sync-interval=-1s"},
		{"--name-hold-ttl=1s"},
		{"--node-timeout=0s"},
		{"--peers=10.0.0.2:8444"},
		{"--peer-service=sandbox-apiserver"},
		{"--peer-bind-address=:8444", "--peers=10.0.0.2:8444", "--peer-service=sandbox-apiserver"},
		{"--peer-bind-address=:8444", "--peers=no-port"},
		{"--peer-bind-address=:8444", "--peer-timeout=0s"},
	} {
		var stderr bytes.Buffer
		if code := run(args, io.Discard, &stderr); code != 2 {
			t.Errorf("run(%v) = %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

func TestHelp(t *testing.T) {
	t.Setenv(logging.LevelEnv, "")
	var stdout bytes.Buffer
	if code := run([]string{"--help"}, &stdout, io.Discard); code != 0 {
		t.Fatalf("--help exit code = %d", code)
	}
	out := stdout.String()
	if !strings.Contains(out, "--sandboxd-token-file") || strings.Contains(out, "--etcd") {
		t.Errorf("help output:\n%s", out)
	}
}

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestE2BStartupValidation(t *testing.T) {
	t.Setenv(logging.LevelEnv, "error")
	secret := writeFile(t, "s3cr3t-value\n")
	keys := writeFile(t, "key1 team-a\n")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--enable-e2b-api"}, "--e2b-domain"},
		{[]string{"--enable-e2b-api", "--e2b-domain=sb.example.com"}, "--e2b-envd-secret-file"},
		{[]string{"--enable-e2b-api", "--e2b-domain=sb.example.com", "--e2b-envd-secret-file=" + secret}, "--e2b-api-key-file"},
		{[]string{"--enable-e2b-api", "--e2b-domain=sb.example.com", "--e2b-envd-secret-file=" + secret + ".gone", "--e2b-api-key-file=" + keys}, "--e2b-envd-secret-file"},
		{[]string{"--enable-e2b-api", "--e2b-domain=sb.example.com", "--e2b-envd-secret-file=" + secret, "--e2b-api-key-file=" + writeFile(t, "ok\nk a b\n")}, "line 2"},
		{[]string{"--enable-e2b-api", "--e2b-domain=sb.example.com", "--e2b-envd-secret-file=" + secret, "--e2b-api-key-file=" + keys, "--e2b-template-alias-file=" + writeFile(t, "base\n")}, "line 1"},
	} {
		var stderr bytes.Buffer
		if code := run(tc.args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("run(%v) = %d, stderr %q; want 2 and a message naming %s", tc.args, code, stderr.String(), tc.want)
		}
		if strings.Contains(stderr.String(), "s3cr3t-value") || strings.Contains(stderr.String(), "key1") {
			t.Errorf("run(%v) printed a secret: %q", tc.args, stderr.String())
		}
	}
	// Without --enable-e2b-api the e2b flags are not required.
	o := newOptions()
	if err := o.flagSet().Parse([]string{"--e2b-domain="}); err != nil || o.validate() != nil {
		t.Errorf("a disabled surface still validates its flags")
	}
	// With everything set, validation reads the files.
	o = newOptions()
	if err := o.flagSet().Parse([]string{"--enable-e2b-api", "--e2b-domain=sb.example.com", "--e2b-envd-secret-file=" + secret, "--e2b-allow-anonymous"}); err != nil {
		t.Fatal(err)
	}
	if err := o.validate(); err != nil || string(o.e2bConfig.EnvdSecret) != "s3cr3t-value" || !o.e2bConfig.AllowAnonymous {
		t.Errorf("validate = %v, config %+v", err, o.e2bConfig.Domain)
	}
}
