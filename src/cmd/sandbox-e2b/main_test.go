package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &out, &errOut); code != serve.ExitOK {
		t.Fatalf("--help exited %d: %s", code, errOut.String())
	}
	for _, flag := range []string{
		"--sandboxd", "--sandboxd-token", "--sandboxd-token-file", "--mesh-refresh-interval", "--mesh-node-timeout",
		"--envd-proxy-bind-address", "--envd-proxy-tls-cert-file", "--envd-proxy-tls-private-key-file", "--guest-http2",
		"--e2b-bind-address", "--e2b-namespace", "--e2b-domain", "--e2b-envd-version", "--e2b-default-timeout",
		"--e2b-api-key-file", "--e2b-allow-anonymous", "--e2b-template-alias-file", "--e2b-envd-secret-file",
		"--e2b-builds", "--e2b-build-parallel", "--e2b-build-timeout", "--e2b-build-log-lines", "--e2b-build-dir",
		"--e2b-build-upload-max", "--e2b-build-store-s3-bucket", "--e2b-build-store-s3-prefix",
		"--e2b-build-store-s3-endpoint", "--e2b-build-store-s3-region", "--e2b-build-store-s3-force-path-style",
		"OPERATOR_LOG_LEVEL",
	} {
		if !strings.Contains(out.String(), flag) {
			t.Errorf("--help does not mention %s", flag)
		}
	}
	if strings.Contains(out.String(), "--enable-e2b-api ") {
		t.Error("--help offers a flag that only sandbox-apiserver has")
	}
}

func TestBadCommandLinesNameTheFlag(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	secret := write("secret", "s3cret\n")
	keys := write("keys", "k1\n")
	token := write("token", "root\n")
	empty := write("empty", "\n")
	base := []string{"--e2b-domain", "e2b.test", "--e2b-envd-secret-file", secret, "--e2b-api-key-file", keys, "--e2b-bind-address", "127.0.0.1:0"}
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no seeds":          {[]string{"--sandboxd-token-file", token}, "--sandboxd"},
		"no token":          {[]string{"--sandboxd", "127.0.0.1:1"}, "--sandboxd-token-file"},
		"empty token file":  {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token-file", empty}, "--sandboxd-token-file"},
		"half a TLS pair":   {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--envd-proxy-bind-address", "127.0.0.1:0", "--envd-proxy-tls-cert-file", secret}, "--envd-proxy-tls-private-key-file"},
		"h2 without proxy":  {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--guest-http2"}, "--guest-http2"},
		"bad interval":      {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--mesh-refresh-interval", "0s"}, "--mesh-refresh-interval"},
		"unknown flag":      {[]string{"--kubeconfig", "x"}, "kubeconfig"},
		"stray argument":    {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "extra"}, "unexpected"},
		"no e2b key source": {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--e2b-api-key-file", ""}, "--e2b-api-key-file"},
		"builds, no store":  {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--e2b-builds"}, "--e2b-build-dir or --e2b-build-store-s3-bucket"},
		"two stores":        {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--e2b-builds", "--e2b-build-dir", dir, "--e2b-build-store-s3-bucket", "b"}, "keep one"},
		"store, no builds":  {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--e2b-build-dir", dir}, "set --e2b-builds"},
		"short timeout":     {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--e2b-builds", "--e2b-build-dir", dir, "--e2b-build-timeout", "10s"}, "--e2b-build-timeout"},
		"no parallel":       {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--e2b-builds", "--e2b-build-dir", dir, "--e2b-build-parallel", "0"}, "--e2b-build-parallel"},
		"s3 without bucket": {[]string{"--sandboxd", "127.0.0.1:1", "--sandboxd-token", "r", "--e2b-builds", "--e2b-build-store-s3-region", "x"}, "--e2b-build-dir or --e2b-build-store-s3-bucket"},
	} {
		var out, errOut bytes.Buffer
		code := run(context.Background(), append(append([]string{}, base...), tc.args...), &out, &errOut)
		if code != serve.ExitUsage || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d naming %s", name, code, errOut.String(), serve.ExitUsage, tc.want)
		}
		if strings.Contains(errOut.String(), "s3cret") {
			t.Errorf("%s: stderr shows a secret: %q", name, errOut.String())
		}
	}
}
