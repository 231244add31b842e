package sandbox

// SizeTier is the machine a size name stands for.
type SizeTier struct {
	CPUCount  int
	MemoryMiB int
	// DiskMiB bounds what the sandbox may write to its disk (its root
	// filesystem's writable layer); 0 means unbounded.
	DiskMiB int
	// DiskBytesPerSec and DiskIOPS are the disk's rate limit, reads and
	// writes each, as a VM's disk rate limiter sets it; 0 means none.
	// They scale with the CPUs, so a tier's share of the host's disk
	// grows with its share of the host.
	DiskBytesPerSec int64
	DiskIOPS        int
}

// MemoryBytes is the tier's memory in bytes.
func (t SizeTier) MemoryBytes() int64 { return int64(t.MemoryMiB) << 20 }

// sizeTiers are the size names sandboxd accepts by default; a pool key
// naming any other size is refused by the node.
var sizeTiers = map[string]SizeTier{
	"small":  {CPUCount: 1, MemoryMiB: 1024, DiskMiB: 2048, DiskBytesPerSec: 1 * diskBytesPerSecPerCPU, DiskIOPS: 1 * diskIOPSPerCPU},
	"medium": {CPUCount: 2, MemoryMiB: 2048, DiskMiB: 4096, DiskBytesPerSec: 2 * diskBytesPerSecPerCPU, DiskIOPS: 2 * diskIOPSPerCPU},
	"large":  {CPUCount: 4, MemoryMiB: 8192, DiskMiB: 16384, DiskBytesPerSec: 4 * diskBytesPerSecPerCPU, DiskIOPS: 4 * diskIOPSPerCPU},
	"xlarge": {CPUCount: 8, MemoryMiB: 16384, DiskMiB: 32768, DiskBytesPerSec: 8 * diskBytesPerSecPerCPU, DiskIOPS: 8 * diskIOPSPerCPU},
}

// diskBytesPerSecPerCPU and diskIOPSPerCPU are each tier's disk rate per
// CPU: 64 MiB/s and 1 000 operations a second for the small tier.
const (
	diskBytesPerSecPerCPU = 64 << 20
	diskIOPSPerCPU        = 1000
)

// SizeTiers returns a copy of the default size tiers by name.
func SizeTiers() map[string]SizeTier {
	out := make(map[string]SizeTier, len(sizeTiers))
	for name, t := range sizeTiers {
		out[name] = t
	}
	return out
}

// SizeOf returns the tier a size name stands for; an empty name is
// DefaultSize.
func SizeOf(name string) (SizeTier, bool) {
	if name == "" {
		name = DefaultSize
	}
	t, ok := sizeTiers[name]
	return t, ok
}
