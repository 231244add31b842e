package oplog

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

func TestParseLevel(t *testing.T) {
	for in, want := range map[string]slog.Level{
		"": slog.LevelInfo, "info": slog.LevelInfo, " DEBUG ": slog.LevelDebug,
		"warn": slog.LevelWarn, "warning": slog.LevelWarn, "error": slog.LevelError,
	} {
		if got, err := ParseLevel(in); err != nil || got != want {
			t.Errorf("ParseLevel(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"verbose", "0", "trace"} {
		if _, err := ParseLevel(in); err == nil || !strings.Contains(err.Error(), LevelEnv) {
			t.Errorf("ParseLevel(%q) = %v, want an error naming %s", in, err, LevelEnv)
		}
	}
}

func TestFromEnvFiltersBelowLevel(t *testing.T) {
	var buf bytes.Buffer
	logger, err := FromEnv(&buf, "warn")
	if err != nil {
		t.Fatal(err)
	}
	logger.Info("hidden")
	logger.Warn("shown")
	if strings.Contains(buf.String(), "hidden") || !strings.Contains(buf.String(), "shown") {
		t.Fatalf("warn logger wrote %q", buf.String())
	}
	if _, err := FromEnv(&buf, "loud"); err == nil {
		t.Fatal("FromEnv accepted an unknown level")
	}
}
