//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package testbin

// lockFile is a no-op where flock is unavailable; concurrent builds of one
// binary then race, which go build tolerates except for a reader catching
// a half-written file.
func lockFile(string) (func(), error) { return func() {}, nil }
