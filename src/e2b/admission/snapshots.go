package admission

import "github.com/cocoonstack/sandbox-operator/src/sandbox"

// SnapshotBound is the most a snapshot of a sandbox of key can hold: its
// size tier's disk, or 0 for a tier without a disk bound. sandboxd reports
// no checkpoint's size, before or after it is taken, so this is what a
// snapshot counts against its namespace's bytes.
func SnapshotBound(key sandbox.PoolKey) int64 {
	tier, _ := sandbox.SizeOf(key.WithDefaults().Size)
	return int64(tier.DiskMiB) << 20
}
