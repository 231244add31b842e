package sandbox

// SizeTier is the machine a size name stands for.
type SizeTier struct {
	CPUCount  int
	MemoryMiB int
	// DiskMiB bounds what the sandbox may write to its disk (its root
	// filesystem's writable layer); 0 means unbounded.
	DiskMiB int
}

// MemoryBytes is the tier's memory in bytes.
func (t SizeTier) MemoryBytes() int64 { return int64(t.MemoryMiB) << 20 }

// sizeTiers are the size names sandboxd accepts by default; a pool key
// naming any other size is refused by the node.
var sizeTiers = map[string]SizeTier{
	"small":  {CPUCount: 1, MemoryMiB: 1024, DiskMiB: 2048},
	"medium": {CPUCount: 2, MemoryMiB: 2048, DiskMiB: 4096},
	"large":  {CPUCount: 4, MemoryMiB: 8192, DiskMiB: 16384},
	"xlarge": {CPUCount: 8, MemoryMiB: 16384, DiskMiB: 32768},
}

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
