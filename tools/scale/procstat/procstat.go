package procstat

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Usage is a process's CPU time and memory at one moment, read from
// /proc.
type Usage struct {
	// CPUSeconds is user plus system time of every thread, live and
	// exited (utime+stime of /proc/PID/stat), at 1/USER_HZ resolution.
	CPUSeconds float64
	// RSSBytes is the resident set now (VmRSS), PeakRSSBytes the highest
	// since the process started or its peak was last reset (VmHWM).
	RSSBytes     uint64
	PeakRSSBytes uint64
}

// CPUDelta is the CPU seconds used between two readings, rounded to the
// millisecond (the readings are whole ticks; the rounding drops the float
// noise of subtracting them).
func CPUDelta(before, after Usage) float64 {
	return math.Round((after.CPUSeconds-before.CPUSeconds)*1000) / 1000
}

// Read reads pid's CPU time and memory.
func Read(pid int) (Usage, error) {
	cpu, err := CPUSeconds(pid)
	if err != nil {
		return Usage{}, err
	}
	rss, peak, err := Memory(pid)
	if err != nil {
		return Usage{}, err
	}
	return Usage{CPUSeconds: cpu, RSSBytes: rss, PeakRSSBytes: peak}, nil
}

// procStatFields returns the fields of /proc/PID/stat after the command
// name, so index 0 is field 3 (state) of proc(5). The name is in
// parentheses and may itself hold spaces and parentheses, so the fields
// start after the last ')'.
func procStatFields(pid int) (comm string, fields []string, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return "", nil, err
	}
	s := string(b)
	open, end := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
	if open < 0 || end < open {
		return "", nil, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	return s[open+1 : end], strings.Fields(s[end+1:]), nil
}

// CPUSeconds returns pid's utime+stime in seconds.
func CPUSeconds(pid int) (float64, error) {
	_, f, err := procStatFields(pid)
	if err != nil {
		return 0, err
	}
	// utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f)+2)
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(utime+stime) / float64(ClockTicks()), nil
}

// Memory returns pid's VmRSS and VmHWM in bytes.
func Memory(pid int) (rss, peak uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0, err
	}
	var gotRSS, gotPeak bool
	for line := range strings.Lines(string(b)) {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		var dst *uint64
		switch k {
		case "VmRSS":
			dst, gotRSS = &rss, true
		case "VmHWM":
			dst, gotPeak = &peak, true
		default:
			continue
		}
		// "   12345 kB"
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s is %q", pid, k, strings.TrimSpace(v))
		}
		n, err := strconv.ParseUint(f[0], 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status: %s: %w", pid, k, err)
		}
		*dst = n * 1024
	}
	if !gotRSS || !gotPeak {
		return 0, 0, fmt.Errorf("/proc/%d/status has no VmRSS or VmHWM (a kernel thread or a zombie?)", pid)
	}
	return rss, peak, nil
}

// ResetPeakRSS resets pid's VmHWM to its current RSS (writing 5 to
// /proc/PID/clear_refs, Linux 4.0 and later; needs ptrace access to pid,
// which a parent running as the same user or root has).
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// FindChild returns the pid of a child of ppid whose command name is comm
// (as /proc/PID/stat shows it, truncated to 15 bytes), or 0.
func FindChild(ppid int, comm string) int {
	if len(comm) > 15 {
		comm = comm[:15]
	}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		return 0
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		c, f, err := procStatFields(pid)
		if err != nil || c != comm || len(f) < 2 {
			continue
		}
		if p, err := strconv.Atoi(f[1]); err == nil && p == ppid {
			return pid
		}
	}
	return 0
}

// atClkTck is the auxiliary vector key of the kernel's USER_HZ.
const atClkTck = 17

var clockTicksOnce = sync.OnceValue(func() int64 {
	// The kernel hands every process USER_HZ in its auxiliary vector
	// (what sysconf(_SC_CLK_TCK) returns); it is 100 on every common
	// Linux build, the fallback.
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil || strconv.IntSize != 64 {
		return 100
	}
	for ; len(b) >= 16; b = b[16:] {
		key, val := binary.NativeEndian.Uint64(b), binary.NativeEndian.Uint64(b[8:])
		if key == 0 {
			break
		}
		if key == atClkTck && val > 0 {
			return int64(val)
		}
	}
	return 100
})

// ClockTicks is USER_HZ, the unit of the times in /proc/PID/stat; results
// record it because it bounds the resolution of every CPU figure.
func ClockTicks() int64 { return clockTicksOnce() }
