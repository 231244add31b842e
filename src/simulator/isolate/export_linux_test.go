package isolate

import "time"

// SetMkfsSearchPath replaces where mkfs.ext4 is looked for besides PATH and
// returns a function that puts it back.
func SetMkfsSearchPath(dirs []string) (restore func()) {
	old := mkfsSearchPath
	mkfsSearchPath = dirs
	return func() { mkfsSearchPath = old }
}

// SetStaleAfter replaces how old unowned leftovers must be before a start
// reclaims them, and returns a function that puts it back.
func SetStaleAfter(d time.Duration) (restore func()) {
	old := staleAfter
	staleAfter = d
	return func() { staleAfter = old }
}
