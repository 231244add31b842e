package isolate

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
)

// Config configures a Runtime.
type Config struct {
	// StateDir holds one directory per sandbox (StateDir/<id>: the writable
	// layer, the overlay's work dir, the relay socket). It is created if
	// missing. Paths inside it must not contain ',' ':' or '\\' (overlay
	// mount options cannot carry them).
	StateDir string
	// CgroupParent is the cgroup (relative to each hierarchy's root) under
	// which every sandbox gets its own cgroup. Empty means no cgroup: no
	// CPU, memory or task (pids) limits and no freezer.
	CgroupParent string
	// Logger receives the runtime's diagnostics; nil discards them.
	Logger *slog.Logger
}

// Spec describes one sandbox.
type Spec struct {
	// ID names the sandbox and its directory under StateDir: letters,
	// digits, '.', '_' and '-', at most 64 bytes, not starting with '.'.
	ID string
	// Hostname inside the sandbox (its own UTS namespace); ID when empty.
	Hostname string
	// RootFS is the read-only lower layer, shared by every sandbox that
	// uses it. It is never written.
	RootFS string
	// Layers are read-only layers stacked over RootFS, the first one on
	// top (overlayfs lower directories): a template that adds to the
	// base (the code interpreter's packages) without copying it. Like
	// RootFS they are shared and never written; whiteouts in them hide
	// what lies below.
	Layers []string
	// From optionally names a directory saved by SaveLayer (or another
	// sandbox's LayerDir while that sandbox is frozen or closed) whose
	// content seeds the new sandbox's writable layer.
	From string
	// CPUCount and MemoryMiB set cgroup limits where the runtime has the
	// controller; 0 means no limit.
	CPUCount, MemoryMiB int
	// DiskMiB bounds the writable layer (everything written outside the
	// tmpfs mounts) the way a VM's disk is bounded: a write past it gets
	// ENOSPC inside. The layer is then its own ext4 filesystem, a sparse
	// image in the sandbox's directory (mkfs.ext4 and loop devices are
	// needed, and root: without root the bound is not applied, as with
	// the cgroup limits). 0 means no bound: the layer is a directory on
	// the state directory's filesystem.
	DiskMiB int
	// DiskBytesPerSec and DiskIOPS throttle the bounded disk (DiskMiB),
	// reads and writes each at that rate, the way a VM's disk has a rate
	// limiter. They take the blkio (v1) or io (v2) controller. On cgroup
	// v1 the kernel charges only the I/O the sandbox's tasks submit
	// (reads, O_DIRECT writes, writes it syncs); buffered writes it
	// leaves to the kernel's flusher escape the limit there. 0 means no
	// limit; without a bounded disk they are not applied.
	DiskBytesPerSec int64
	DiskIOPS        int
	// MaxPIDs caps the tasks (processes and threads) the sandbox may have
	// at once (the pids controller), so a fork bomb inside gets EAGAIN
	// instead of using up the host's PIDs. 0 means PIDsPerCPU for each CPU
	// of CPUCount (PIDsPerCPU when CPUCount is 0), so the cap scales with
	// the size tier; a negative value means no cap.
	MaxPIDs int
	// User is the user Command runs as inside, looked up in the root
	// filesystem's /etc/passwd; empty means root.
	User string
	// Program is the name given to Register; Config is passed to it as is.
	Program string
	Config  []byte
	// Stdout and Stderr receive the output of the sandbox's init and
	// program; nil discards it.
	Stdout, Stderr io.Writer
	// Mounts are host directories bound into the sandbox's root
	// filesystem, in order, before its program starts.
	Mounts []Mount
}

// tmpfsMiB is the size of each of the sandbox's tmpfs mounts (/tmp and
// /dev/shm): a quarter of the memory limit, so that both full hold half of
// it and a sandbox that fills them gets ENOSPC rather than an out-of-memory
// kill (their pages count against its memory). Without a memory limit,
// defaultTmpfsMiB.
func (s Spec) tmpfsMiB() int {
	if s.MemoryMiB > 0 {
		return max(s.MemoryMiB/4, 1)
	}
	return defaultTmpfsMiB
}

// defaultTmpfsMiB bounds the tmpfs mounts of a sandbox without a memory
// limit.
const defaultTmpfsMiB = 256

// PIDsPerCPU is the default task cap per CPU of Spec.CPUCount: 512 for a
// one-CPU sandbox (the small tier), 4096 for an eight-CPU one. It is far
// above what a sandbox's own programs (a shell, a language server, a
// Jupyter kernel) start, and far below the host's pid_max.
const PIDsPerCPU = 512

// maxPIDs is the pids.max the spec asks for; 0 means no cap.
func (s Spec) maxPIDs() int {
	switch {
	case s.MaxPIDs < 0:
		return 0
	case s.MaxPIDs > 0:
		return s.MaxPIDs
	}
	return PIDsPerCPU * max(s.CPUCount, 1)
}

// Mount binds a host directory into a sandbox.
type Mount struct {
	// Source is an absolute host directory.
	Source string
	// Target is the absolute, clean path inside the sandbox; missing
	// directories on the way are created in the writable layer. It may not
	// be /, nor lie under /proc, /dev or /tmp, which the sandbox mounts
	// itself.
	Target string
	// ReadOnly makes the bind read-only inside the sandbox.
	ReadOnly bool
}

// ErrNoFreezer is returned by Freeze and Thaw when the sandbox has no cgroup
// freezer (no CgroupParent, or the machine has none).
var ErrNoFreezer = errors.New("isolate: no cgroup freezer for this sandbox")

// ErrClosed is returned by operations on a closed sandbox.
var ErrClosed = errors.New("isolate: sandbox closed")

var (
	registryMu sync.RWMutex
	registry   = map[string]func(ctx context.Context, config []byte) error{}
)

// Register makes fn runnable as a sandbox's program under name. Call it from
// an init func, so the re-executed binary knows the name before Init runs.
// fn runs inside the sandbox as root (PID 1's child); ctx is cancelled on SIGTERM or
// SIGINT. When fn returns the sandbox ends: a nil error exits 0, otherwise
// the error is printed to the sandbox's stderr and it exits 1.
func Register(name string, fn func(ctx context.Context, config []byte) error) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[name]; dup {
		panic(fmt.Sprintf("isolate: program %q registered twice", name))
	}
	registry[name] = fn
}

func lookupProgram(name string) (func(ctx context.Context, config []byte) error, bool) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	fn, ok := registry[name]
	return fn, ok
}
