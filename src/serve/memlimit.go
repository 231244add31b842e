package serve

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// MemoryLimitShare is the share of the container's memory limit the Go
// runtime is told it may use. The rest is headroom for what the runtime
// does not count (thread stacks, the binary, cgo-free but mapped pages) so
// the garbage collector works harder before the kernel kills the process.
const MemoryLimitShare = 0.9

// LimitMemory sets the Go runtime's soft memory limit to MemoryLimitShare
// of the memory limit of the cgroup the process runs in, unless GOMEMLIMIT
// is set (the operator's choice wins) or there is no limit. It returns the
// limit it set, 0 when it set none.
//
// Without it the heap may grow to twice what is live before a collection.
// The servers hold the fleet's inventory: at 50 000 sandboxes a pod with
// the chart's 512Mi limit could be killed by a list that needed far less
// than that live (docs/performance.md).
//
// root is the cgroup filesystem's mount point, "" for /sys/fs/cgroup.
func LimitMemory(logger *slog.Logger, root string) int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	if root == "" {
		root = "/sys/fs/cgroup"
	}
	limit, err := cgroupMemoryLimit(root)
	if err != nil {
		logger.Debug("no cgroup memory limit to follow", "err", err)
		return 0
	}
	soft := int64(float64(limit) * MemoryLimitShare)
	debug.SetMemoryLimit(soft)
	logger.Info("Go memory limit set from the cgroup's", "cgroupLimitBytes", limit, "goMemLimitBytes", soft)
	return soft
}

// errNoLimit is a cgroup without a memory limit.
var errNoLimit = errors.New("the cgroup sets no memory limit")

// cgroupMemoryLimit reads the memory limit of this process's cgroup:
// memory.max under cgroup v2, memory.limit_in_bytes under v1. The cgroup
// is the one /proc/self/cgroup names; in a container's own namespace that
// is the root of the mount.
func cgroupMemoryLimit(root string) (int64, error) {
	v2, v1 := "/", "/"
	if b, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			parts := strings.SplitN(line, ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				v2 = parts[2]
			case strings.Contains(","+parts[1]+",", ",memory,"):
				v1 = parts[2]
			}
		}
	}
	candidates := []struct{ file, cgroup string }{
		{"memory.max", filepath.Join(root, v2)},
		{"memory.max", root},
		{"memory.limit_in_bytes", filepath.Join(root, "memory", v1)},
		{"memory.limit_in_bytes", filepath.Join(root, "memory")},
	}
	for _, c := range candidates {
		b, err := os.ReadFile(filepath.Join(c.cgroup, c.file))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("reading the cgroup memory limit: %w", err)
		}
		return parseMemoryLimit(string(b))
	}
	return 0, errNoLimit
}

// parseMemoryLimit reads a limit file's content: bytes, or "max" (v2) or a
// page-rounded huge number (v1, no limit).
func parseMemoryLimit(s string) (int64, error) {
	s = strings.TrimSpace(s)
	if s == "max" {
		return 0, errNoLimit
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("cgroup memory limit %q: %w", s, err)
	}
	// cgroup v1 reports "no limit" as the largest page-aligned int64.
	if n <= 0 || n >= math.MaxInt64/2 {
		return 0, errNoLimit
	}
	return n, nil
}
