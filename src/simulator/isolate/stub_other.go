//go:build !linux

package isolate

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os/exec"
)

// errUnsupported says why nothing here works: namespaces, overlayfs and the
// cgroup freezer are Linux facilities.
var errUnsupported = errors.New("isolate: sandbox isolation needs Linux (namespaces, overlayfs, cgroups)")

// Init does nothing outside Linux: no process here is ever a sandbox init.
func Init() {}

// Available always fails outside Linux.
func Available() error { return errUnsupported }

// Runtime is unusable outside Linux; New always fails.
type Runtime struct{}

// New always fails outside Linux.
func New(cfg Config) (*Runtime, error) { return nil, errUnsupported }

// Start always fails outside Linux.
func (r *Runtime) Start(ctx context.Context, spec Spec) (*Sandbox, error) {
	return nil, errUnsupported
}

// Lookup finds nothing outside Linux.
func (r *Runtime) Lookup(id string) (*Sandbox, bool) { return nil, false }

// HasFreezer reports false outside Linux.
func (r *Runtime) HasFreezer() bool { return false }

// Close does nothing outside Linux.
func (r *Runtime) Close() error { return nil }

// Sandbox is never created outside Linux.
type Sandbox struct{}

func (s *Sandbox) ID() string                                           { return "" }
func (s *Sandbox) PID() int                                             { return 0 }
func (s *Sandbox) Dial(ctx context.Context, port int) (net.Conn, error) { return nil, errUnsupported }
func (s *Sandbox) Freeze() error                                        { return errUnsupported }
func (s *Sandbox) Thaw() error                                          { return errUnsupported }
func (s *Sandbox) CheckFrozen() error                                   { return errUnsupported }
func (s *Sandbox) SaveLayer(dir string) error                           { return errUnsupported }
func (s *Sandbox) LayerDir() string                                     { return "" }
func (s *Sandbox) Dir() string                                          { return "" }
func (s *Sandbox) RelaySocket() string                                  { return "" }
func (s *Sandbox) Done() <-chan struct{}                                { return nil }
func (s *Sandbox) Err() error                                           { return errUnsupported }
func (s *Sandbox) Close() error                                         { return nil }

// Command outside Linux is a plain command: there is no sandbox user.
func Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, name, args...)
}

// ReclaimStateDirs has nothing to reclaim outside Linux.
func ReclaimStateDirs(pattern string, logger *slog.Logger) (int, error) { return 0, nil }
