package main

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestParseLogLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"": slog.LevelInfo, "info": slog.LevelInfo, "INFO": slog.LevelInfo, " debug ": slog.LevelDebug,
		"warn": slog.LevelWarn, "warning": slog.LevelWarn, "error": slog.LevelError,
	} {
		got, err := parseLogLevel(in)
		if err != nil || got != want {
			t.Errorf("parseLogLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"trace", "verbose", "4", "fatal"} {
		if _, err := parseLogLevel(in); err == nil || !strings.Contains(err.Error(), logLevelEnv) {
			t.Errorf("parseLogLevel(%q) = %v, want an error naming %s", in, err, logLevelEnv)
		}
	}
}

func TestUnknownLogLevelFailsStartup(t *testing.T) {
	t.Setenv(logLevelEnv, "chatty")
	var stderr bytes.Buffer
	if code := run([]string{"--help"}, &stderr); code != 2 {
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
		"enable-warm-pool-driver", "warm-pool-sync-interval",
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
	if !o.enableWarmPoolDriver || o.inventory.StaleAfter != 90*time.Second {
		t.Errorf("defaults: warm-pool driver %v, stale-after %v", o.enableWarmPoolDriver, o.inventory.StaleAfter)
	}
	if err := o.validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestInvalidFlagsFailStartup(t *testing.T) {
	t.Setenv(logLevelEnv, "error")
	for _, args := range [][]string{
		{"--etcd-servers=http://127.0.0.1:2379"},
		{"--inventory-stale-after=0s"},
		{"--warm-pool-sync-interval=-1s"},
	} {
		var stderr bytes.Buffer
		if code := run(args, &stderr); code != 2 {
			t.Errorf("run(%v) = %d, want 2 (stderr %q)", args, code, stderr.String())
		}
	}
}

func TestHelp(t *testing.T) {
	t.Setenv(logLevelEnv, "")
	var stderr bytes.Buffer
	if code := run([]string{"--help"}, &stderr); code != 0 {
		t.Fatalf("--help exit code = %d", code)
	}
	out := stderr.String()
	if !strings.Contains(out, "--sandboxd-token-file") || strings.Contains(out, "--etcd") {
		t.Errorf("help output:\n%s", out)
	}
}
