package isolate

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// What an unclean stop (the host process killed, the machine reset) leaves
// behind: the sandboxes themselves die with their host process (each init
// has a parent-death signal), but their empty cgroups, their state
// directories with the writable layers, and the mounts of bounded disks
// stay. The next start reclaims them.
//
// staleAfter is how old an unowned leftover must be before it is taken:
// a runtime being created right now, or a sandbox between its cgroup's
// creation and its init joining it, looks unowned for a moment.
var staleAfter = time.Minute

// lockStateDir takes an exclusive lock on dir for as long as the returned
// file stays open: the mark of a live runtime that ReclaimStateDirs
// honours. The lock is the kernel's (flock), so it goes with the process
// however the process ends.
func lockStateDir(dir string) (*os.File, error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("isolate: lock state dir: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("isolate: state dir %s is in use by another runtime", dir)
		}
		return nil, fmt.Errorf("isolate: lock state dir %s: %w", dir, err)
	}
	return f, nil
}

// ReclaimStateDirs removes the runtime state directories matching pattern
// (a filepath.Glob pattern naming sibling StateDirs, e.g.
// "/var/lib/sim/machines-*") that no live Runtime holds and that are older
// than a minute, with everything mounted under them. It returns how many
// it removed.
func ReclaimStateDirs(pattern string, logger *slog.Logger) (int, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	dirs, err := filepath.Glob(pattern)
	if err != nil {
		return 0, fmt.Errorf("isolate: reclaim %q: %w", pattern, err)
	}
	removed := 0
	var errs []error
	for _, dir := range dirs {
		fi, err := os.Lstat(dir)
		if err != nil || !fi.IsDir() || time.Since(fi.ModTime()) < staleAfter {
			continue
		}
		lock, err := lockStateDir(dir)
		if err != nil {
			continue // live, or not ours to judge
		}
		err = detachMountsUnder(dir)
		if err == nil {
			err = os.RemoveAll(dir)
		}
		lock.Close()
		if err != nil {
			errs = append(errs, fmt.Errorf("isolate: reclaim %s: %w", dir, err))
			continue
		}
		logger.Info("isolate: reclaimed the state of an earlier runtime", "dir", dir)
		removed++
	}
	return removed, errors.Join(errs...)
}

// reclaimStaleCgroups removes the sandbox cgroups under each base that
// hold no process and are older than staleAfter: what sandboxes of an
// earlier, uncleanly stopped runtime left. A live sandbox's cgroup always
// holds its init (frozen or not); one whose sandbox ended is removed by its
// own Close as well, which tolerates finding it gone.
func (cg *cgroups) reclaimStale() int {
	removed := 0
	for _, base := range cg.bases {
		ents, err := os.ReadDir(base)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if !e.IsDir() {
				continue
			}
			dir := filepath.Join(base, e.Name())
			procs, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
			if err != nil || strings.TrimSpace(string(procs)) != "" {
				continue
			}
			var st unix.Stat_t
			if err := unix.Stat(dir, &st); err != nil || time.Since(time.Unix(st.Ctim.Unix())) < staleAfter {
				continue
			}
			if err := os.Remove(dir); err == nil {
				removed++
			}
		}
	}
	if removed > 0 {
		cg.logger.Info("isolate: removed empty cgroups left by an earlier runtime", "count", removed)
	}
	return removed
}
