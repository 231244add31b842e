package serve

import (
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"testing"
)

func TestParseMemoryLimit(t *testing.T) {
	for in, want := range map[string]int64{"536870912\n": 536870912, "1048576": 1 << 20} {
		if got, err := parseMemoryLimit(in); err != nil || got != want {
			t.Errorf("parseMemoryLimit(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"max\n", "9223372036854771712", "0"} {
		if _, err := parseMemoryLimit(in); !errors.Is(err, errNoLimit) {
			t.Errorf("parseMemoryLimit(%q) = %v, want no limit", in, err)
		}
	}
	if _, err := parseMemoryLimit("lots"); err == nil || errors.Is(err, errNoLimit) {
		t.Errorf("parseMemoryLimit(garbage) = %v, want a parse error", err)
	}
}

// TestLimitMemoryFollowsTheCgroup reads a cgroup v2 limit from a fake
// cgroup mount at its root (what a container's namespace shows) and sets
// the runtime's limit to the share of it.
func TestLimitMemoryFollowsTheCgroup(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "")
	os.Unsetenv("GOMEMLIMIT")
	prev := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prev) })
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "memory.max"), []byte("536870912\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cgroupLimit := float64(536870912)
	want := int64(cgroupLimit * MemoryLimitShare)
	if got := LimitMemory(logger, root); got != want {
		t.Fatalf("LimitMemory = %d, want %d", got, want)
	}
	if got := debug.SetMemoryLimit(-1); got != want {
		t.Fatalf("runtime memory limit %d, want %d", got, want)
	}

	empty := t.TempDir()
	debug.SetMemoryLimit(prev)
	if got := LimitMemory(logger, empty); got != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Fatalf("without a limit LimitMemory set %d", got)
	}

	t.Setenv("GOMEMLIMIT", "100MiB")
	if got := LimitMemory(logger, root); got != 0 || debug.SetMemoryLimit(-1) != prev {
		t.Fatal("LimitMemory overrode GOMEMLIMIT")
	}
}
