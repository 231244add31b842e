package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/internal/logging"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/src/testing/syncbuf"
)

// writeFile writes content to a new file in a test directory.
func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// kubeconfigFor writes a kubeconfig whose cluster is server.
func kubeconfigFor(t *testing.T, server string) string {
	return writeFile(t, "kubeconfig", `apiVersion: v1
kind: Config
clusters:
- name: sim
  cluster:
    server: `+server+`
users:
- name: sim
  user: {}
contexts:
- name: sim
  context: {cluster: sim, user: sim}
current-context: sim
`)
}

// noAmbientKubeconfig makes client-go find no configuration at all.
func noAmbientKubeconfig(t *testing.T) {
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "missing"))
	t.Setenv("HOME", t.TempDir())
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
}

func TestHelpDocumentsEveryFlag(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"--help"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("--help exited %d: %s", code, stderr.String())
	}
	help := stdout.String()
	fs, _, _ := newFlagSet()
	n := 0
	fs.VisitAll(func(f *flag.Flag) {
		n++
		if !strings.Contains(help, "  -"+f.Name+" ") && !strings.Contains(help, "  -"+f.Name+"\n") {
			t.Errorf("--help does not document -%s", f.Name)
		}
	})
	for _, name := range []string{"envd", "envd-secret-file", "envd-version", "kubeconfig", "publish", "publish-interval", "advertise-host", "listen-host"} {
		if fs.Lookup(name) == nil {
			t.Errorf("no -%s flag", name)
		}
	}
	for _, must := range []string{"EXECUTES COMMANDS ON THIS HOST", "127.0.0.1 (loopback)", "$KUBECONFIG is read only with --publish"} {
		if !strings.Contains(strings.Join(strings.Fields(help), " "), must) {
			t.Errorf("--help does not say %q", must)
		}
	}
	if n < 25 || stderr.Len() != 0 {
		t.Errorf("%d flags documented; stderr %q", n, stderr.String())
	}
}

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	noAmbientKubeconfig(t)
	empty := writeFile(t, "empty", "\n")
	secret := writeFile(t, "secret", "s3cret\n")
	tenants := writeFile(t, "tenants", "team tenant-token-value not-a-number\n")
	kubeconfig := kubeconfigFor(t, "http://127.0.0.1:1")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--nodes", "0"}, "--nodes"},
		{[]string{"--nodes", "three"}, "-nodes"},
		{[]string{"--no-such-flag"}, "no-such-flag"},
		{[]string{"stray"}, "unexpected arguments"},
		{[]string{"--base-port", "65535", "--nodes", "2"}, "--base-port"},
		{[]string{"--listen-host", ""}, "--listen-host"},
		{[]string{"--refill-concurrency", "0"}, "--refill-concurrency"},
		{[]string{"--max-ttl", "1m", "--default-ttl", "5m"}, "--max-ttl"},
		{[]string{"--reap-interval", "0s"}, "--reap-interval"},
		{[]string{"--pools", "base"}, "--pools"},
		{[]string{"--pools", "base:none:small=-1"}, "--pools"},
		{[]string{"--echo-ports", "70000"}, "--echo-ports"},
		{[]string{"--tcp-echo-ports", "x"}, "--tcp-echo-ports"},
		{[]string{"--log-level", "loud"}, "--log-level"},
		{[]string{"--api-token-file", "/nonexistent/token"}, "--api-token-file"},
		{[]string{"--tenant-tokens-file", tenants}, "--tenant-tokens-file"},
		{[]string{"--envd-secret-file", "/nonexistent/secret"}, "--envd-secret-file"},
		{[]string{"--envd-secret-file", empty}, "--envd-secret-file"},
		{[]string{"--envd-secret-file="}, "--envd-secret-file"},
		{[]string{"--envd=false", "--envd-secret-file", secret}, "--envd-secret-file"},
		{[]string{"--envd=false", "--envd-version", "0.9.0"}, "--envd-version"},
		{[]string{"--envd-version="}, "--envd-version"},
		{[]string{"--envd=maybe"}, "-envd"},
		{[]string{"--kubeconfig", "/nonexistent/kubeconfig"}, "--kubeconfig"},
		{[]string{"--kubeconfig="}, "--kubeconfig"},
		{[]string{"--publish"}, "--publish"},
		{[]string{"--publish-interval", "10s"}, "--publish-interval"},
		{[]string{"--kubeconfig", kubeconfig, "--publish-interval", "0s"}, "--publish-interval"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || stdout.Len() != 0 {
			t.Errorf("%q: exit %d, stderr %q; want exit 2 naming %s", tc.args, code, stderr.String(), tc.want)
		}
		if strings.Contains(stderr.String(), "tenant-token-value") || strings.Contains(stderr.String(), "s3cret") {
			t.Errorf("%q: a secret leaked into stderr: %q", tc.args, stderr.String())
		}
	}
}

// TestLogLevelFromTheEnvironment: OPERATOR_LOG_LEVEL sets the level, as
// for every binary; --log-level wins; a bad value names the variable's
// value.
func TestLogLevelFromTheEnvironment(t *testing.T) {
	t.Setenv(logging.LevelEnv, "debug")
	if o, err := parseFlags(nil); err != nil || o.logLevel != slog.LevelDebug {
		t.Fatalf("%s=debug: level %v, %v", logging.LevelEnv, o.logLevel, err)
	}
	if o, err := parseFlags([]string{"--log-level=warn"}); err != nil || o.logLevel != slog.LevelWarn {
		t.Fatalf("--log-level=warn over %s=debug: level %v, %v", logging.LevelEnv, o.logLevel, err)
	}
	t.Setenv(logging.LevelEnv, "chatty")
	if _, err := parseFlags(nil); err == nil || !strings.Contains(err.Error(), "chatty") {
		t.Fatalf("%s=chatty: %v; want an error naming it", logging.LevelEnv, err)
	}
}

func TestParseFlags(t *testing.T) {
	api := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(api.Close)
	kubeconfig := kubeconfigFor(t, api.URL)

	t.Run("defaults", func(t *testing.T) {
		// An ambient kubeconfig alone never turns publishing on.
		t.Setenv("KUBECONFIG", kubeconfig)
		o, err := parseFlags(nil)
		if err != nil {
			t.Fatal(err)
		}
		c := o.fleet
		if c.Nodes != 1 || c.ListenHost != "127.0.0.1" || c.Publish != nil || c.Envd == nil ||
			c.Envd.Version != "0.8.0" || len(c.Envd.Secret) != 0 || len(c.EchoPorts) != 1 || c.EchoPorts[0] != 8080 {
			t.Fatalf("defaults = %+v (envd %+v)", c, c.Envd)
		}
	})

	t.Run("envd and pools", func(t *testing.T) {
		secret := writeFile(t, "secret", "  envd-key\n")
		o, err := parseFlags([]string{"--nodes", "3", "--envd-secret-file", secret, "--envd-version", "0.9.1",
			"--pools", "base:24.04:none:small=4,py:3.12::=2", "--echo-ports", ""})
		if err != nil {
			t.Fatal(err)
		}
		c := o.fleet
		if c.Nodes != 3 || c.EgressAttachment || string(c.Envd.Secret) != "envd-key" || c.Envd.Version != "0.9.1" || len(c.EchoPorts) != 0 {
			t.Fatalf("config = %+v (envd %+v)", c, c.Envd)
		}
		if len(c.Pools) != 2 || c.Pools[0].Template != "base:24.04" || c.Pools[0].Warm != 4 || c.Pools[1].Template != "py:3.12" || c.Pools[1].Net != "" {
			t.Fatalf("pools = %+v", c.Pools)
		}
		if o, err := parseFlags([]string{"--egress-attachment", "--pools", "base:egress:small=2"}); err != nil ||
			!o.fleet.EgressAttachment || o.fleet.Pools[0].Net != "egress" {
			t.Fatalf("--egress-attachment: %+v %v", o, err)
		}
		if o, err := parseFlags([]string{"--envd=false"}); err != nil || o.fleet.Envd != nil {
			t.Fatalf("--envd=false: %+v %v", o, err)
		}
	})

	t.Run("publishing", func(t *testing.T) {
		o, err := parseFlags([]string{"--kubeconfig", kubeconfig, "--publish-interval", "5s"})
		if err != nil {
			t.Fatal(err)
		}
		if o.fleet.Publish == nil || o.fleet.Publish.Interval != 5*time.Second || o.apiserver != api.URL {
			t.Fatalf("--kubeconfig: publish %+v to %q", o.fleet.Publish, o.apiserver)
		}
		t.Setenv("KUBECONFIG", kubeconfig)
		o, err = parseFlags([]string{"--publish"})
		if err != nil {
			t.Fatal(err)
		}
		if o.fleet.Publish == nil || o.fleet.Publish.Interval != 30*time.Second || o.apiserver != api.URL {
			t.Fatalf("--publish with $KUBECONFIG: publish %+v to %q", o.fleet.Publish, o.apiserver)
		}
	})
}

func TestRunServesAndPublishesUntilCancelled(t *testing.T) {
	var mu sync.Mutex
	applied := map[string]bool{}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		if r.Method == http.MethodPatch {
			mu.Lock()
			applied[r.URL.Path] = true
			mu.Unlock()
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(api.Close)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var stdout, stderr syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"--nodes", "2", "--kubeconfig", kubeconfigFor(t, api.URL),
			"--envd-secret-file", writeFile(t, "secret", "k"), "--scratch-dir", t.TempDir(), "--log-level", "error"}, &stdout, &stderr)
	}()

	poll.UntilNil(t, "the fleet to come up and publish", func() error {
		select {
		case code := <-done:
			t.Fatalf("run exited %d early: %s", code, stderr.String())
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		if strings.Count(stdout.String(), "NODE ") != 2 || len(applied) != 2 {
			return fmt.Errorf("stdout %q, applies %v, stderr %q", stdout.String(), applied, stderr.String())
		}
		return nil
	})
	for i, line := range strings.Split(strings.TrimSpace(stdout.String()), "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[1] != "sim-node-"+string(rune('0'+i)) || !strings.HasPrefix(f[2], "127.0.0.1:") {
			t.Errorf("stdout line %q", line)
		}
	}
	mu.Lock()
	for _, name := range []string{"sim-node-0", "sim-node-1"} {
		if !applied["/apis/sandbox.cocoonstack.io/v1beta1/nodeinventories/"+name] {
			t.Errorf("no NodeInventory applied for %s: %v", name, applied)
		}
	}
	mu.Unlock()

	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("run exited %d after cancel: %s", code, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}
