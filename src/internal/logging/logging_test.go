package logging

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/klog/v2"
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

func TestKlogLandsInTheSameStream(t *testing.T) {
	var buf bytes.Buffer
	New(&buf, slog.LevelInfo)
	klog.InfoS("from client-go", "k", "v")
	klog.V(4).InfoS("verbose detail")
	klog.Flush()
	if !strings.Contains(buf.String(), "from client-go") || !strings.Contains(buf.String(), "k=v") {
		t.Fatalf("klog's line is missing from the process stream: %q", buf.String())
	}
	if strings.Contains(buf.String(), "verbose detail") {
		t.Fatalf("klog's verbose line appeared at info: %q", buf.String())
	}
	buf.Reset()
	New(&buf, slog.LevelDebug)
	klog.V(4).InfoS("verbose detail")
	if !strings.Contains(buf.String(), "verbose detail") {
		t.Fatalf("klog's verbose line is missing at debug: %q", buf.String())
	}
}

// TestClientInputStaysOnItsLine is what every binary relies on when it
// logs a client's path, id or error through the process logger: the text
// handler quotes a message or value holding a newline, CR, ESC or another
// control character, so a client cannot forge a line or reach the
// terminal.
func TestClientInputStaysOnItsLine(t *testing.T) {
	var buf bytes.Buffer
	logger := New(&buf, slog.LevelInfo)
	forged := "/x\n12:00:00 level=ERROR msg=forged\r\x1b[2K\u009b\u202e"
	logger.Info(forged, "path", forged, "err", errors.New(forged))
	klog.InfoS(forged, "id", forged)
	klog.Flush()
	out := strings.TrimSuffix(buf.String(), "\n")
	if n := strings.Count(out, "\n"); n != 1 {
		t.Fatalf("two records wrote %d lines: %q", n+1, out)
	}
	if strings.ContainsAny(out, "\r\x1b\u009b\u202e") {
		t.Fatalf("a control character reached the log: %q", out)
	}
}
