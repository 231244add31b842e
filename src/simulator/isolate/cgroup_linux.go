package isolate

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

const cgroupRoot = "/sys/fs/cgroup"

// cgroups finds the hierarchies once per Runtime. On cgroup v2 (a unified
// hierarchy at /sys/fs/cgroup) everything is one directory per sandbox; on
// v1 each controller we use (freezer, memory, cpu, pids, blkio) has its own hierarchy,
// and a sandbox gets a directory in each one that is mounted.
type cgroups struct {
	v2     bool
	bases  map[string]string // controller ("" on v2) → CgroupParent's directory
	logger *slog.Logger
	// created are the directories newCgroups made, deepest first.
	created []string
}

// v1Controllers are the v1 hierarchies a sandbox joins.
var v1Controllers = []string{"freezer", "memory", "cpu", "pids", "blkio"}

// v2Controllers are the controllers enabled on the way down to a sandbox's
// v2 cgroup.
var v2Controllers = []string{"cpu", "memory", "pids", "io"}

func newCgroups(parent string, logger *slog.Logger) (*cgroups, error) {
	parent = strings.Trim(filepath.Clean("/"+parent), "/")
	if parent == "" || parent == "." {
		return nil, errors.New("isolate: CgroupParent must name a cgroup below the root")
	}
	cg := &cgroups{bases: map[string]string{}, logger: logger}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "cgroup.controllers")); err == nil {
		cg.v2 = true
		base := filepath.Join(cgroupRoot, parent)
		if err := cg.mkdir(cgroupRoot, base); err != nil {
			return nil, err
		}
		// Limits need the controllers enabled on the way down; a missing
		// controller only means that limit is not applied.
		for dir := cgroupRoot; ; {
			// One at a time: a write naming several fails as a whole when
			// one of them is unavailable.
			for _, ctl := range v2Controllers {
				if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+"+ctl), 0); err != nil {
					logger.Warn("isolate: cannot enable a cgroup controller; its limit is not applied", "cgroup", dir, "controller", ctl, "err", err)
				}
			}
			if dir == base {
				break
			}
			rel, _ := filepath.Rel(dir, base)
			dir = filepath.Join(dir, strings.Split(rel, "/")[0])
		}
		cg.bases[""] = base
		return cg, nil
	}
	mounts, err := v1Mounts()
	if err != nil {
		return nil, err
	}
	for _, ctl := range v1Controllers {
		mnt, ok := mounts[ctl]
		if !ok {
			logger.Warn("isolate: cgroup v1 controller not mounted; its limits are not applied", "controller", ctl)
			continue
		}
		base := filepath.Join(mnt, parent)
		if err := cg.mkdir(mnt, base); err != nil {
			return nil, err
		}
		cg.bases[ctl] = base
	}
	if len(cg.bases) == 0 {
		return nil, errors.New("isolate: no cgroup hierarchy found (neither v2 nor the v1 freezer, memory, cpu, pids or blkio controllers)")
	}
	return cg, nil
}

// mkdir creates the cgroup base below root, remembering the directories
// it made, so release leaves the hierarchy as it found it.
func (cg *cgroups) mkdir(root, base string) error {
	var missing []string
	for dir := base; dir != root && dir != "/" && dir != "."; dir = filepath.Dir(dir) {
		if _, err := os.Stat(dir); err == nil {
			break
		}
		missing = append(missing, dir)
	}
	if err := os.MkdirAll(base, 0o755); err != nil {
		return fmt.Errorf("isolate: create cgroup %s: %w", base, err)
	}
	cg.created = append(cg.created, missing...) // deepest first
	return nil
}

// release removes the cgroup directories mkdir made, deepest first. One
// still holding a cgroup (another runtime's, or a sandbox not yet closed)
// stays: rmdir refuses a busy cgroup.
func (cg *cgroups) release() {
	for _, dir := range cg.created {
		_ = os.Remove(dir)
	}
	cg.created = nil
}

// v1Mounts maps each v1 controller to its hierarchy's mount point, from
// /proc/self/mountinfo (controllers may share a hierarchy, e.g. cpu,cpuacct).
func v1Mounts() (map[string]string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// mountinfo: ... mountpoint(4) ... "-" fstype source superopts
		sep := -1
		for i, fld := range fields {
			if fld == "-" {
				sep = i
				break
			}
		}
		if sep < 0 || sep+3 >= len(fields) || fields[sep+1] != "cgroup" {
			continue
		}
		for _, opt := range strings.Split(fields[sep+3], ",") {
			if _, seen := out[opt]; !seen {
				out[opt] = fields[4]
			}
		}
	}
	return out, sc.Err()
}

func (cg *cgroups) hasFreezer() bool {
	if cg == nil {
		return false
	}
	if cg.v2 {
		return true
	}
	_, ok := cg.bases["freezer"]
	return ok
}

// cgroup is one sandbox's cgroup: a directory per hierarchy.
type cgroup struct {
	v2      bool
	dirs    map[string]string // controller ("" on v2) → directory
	freezer string            // directory holding the freeze control; "" if none
}

// limits are what a sandbox's cgroup caps; a zero field is not capped.
type limits struct {
	cpus, memMiB, pids int
	// disk is the block device (the bounded disk's loop device) that
	// diskBPS and diskIOPS throttle, each direction on its own; 0 when
	// the sandbox has no disk of its own.
	disk     uint64
	diskBPS  int64
	diskIOPS int
}

// create makes the sandbox's cgroup and applies the limits.
func (cg *cgroups) create(id string, lim limits) (*cgroup, error) {
	c := &cgroup{v2: cg.v2, dirs: map[string]string{}}
	for ctl, base := range cg.bases {
		dir := filepath.Join(base, id)
		if err := os.Mkdir(dir, 0o755); err != nil {
			c.remove()
			return nil, fmt.Errorf("isolate: create cgroup %s: %w", dir, err)
		}
		c.dirs[ctl] = dir
		if ctl == "" || ctl == "freezer" {
			c.freezer = dir
		}
	}
	if err := c.limit(lim, cg.logger); err != nil {
		c.remove()
		return nil, err
	}
	return c, nil
}

// cfsPeriod is the CPU bandwidth period; a quota of n periods is n CPUs.
const cfsPeriod = 100000

func (c *cgroup) limit(lim limits, logger *slog.Logger) error {
	set := func(ctl, file, value string) error {
		dir, ok := c.dirs[ctl]
		if !ok {
			logger.Warn("isolate: no cgroup controller for a requested limit; not applied", "controller", ctl, "file", file)
			return nil
		}
		if err := os.WriteFile(filepath.Join(dir, file), []byte(value), 0); err != nil {
			// On v2 a controller the parent could not enable has no files:
			// like a missing v1 hierarchy, its limit is not applied.
			if c.v2 && errors.Is(err, os.ErrNotExist) {
				logger.Warn("isolate: cgroup controller not enabled; limit not applied", "cgroup", dir, "file", file)
				return nil
			}
			return fmt.Errorf("isolate: set %s: %w", filepath.Join(dir, file), err)
		}
		return nil
	}
	ioLimits := lim.disk != 0 && (lim.diskBPS > 0 || lim.diskIOPS > 0)
	device := fmt.Sprintf("%d:%d", unix.Major(lim.disk), unix.Minor(lim.disk))
	if c.v2 {
		if lim.cpus > 0 {
			if err := set("", "cpu.max", fmt.Sprintf("%d %d", lim.cpus*cfsPeriod, cfsPeriod)); err != nil {
				return err
			}
		}
		if lim.memMiB > 0 {
			if err := set("", "memory.max", strconv.FormatInt(int64(lim.memMiB)<<20, 10)); err != nil {
				return err
			}
		}
		if lim.pids > 0 {
			if err := set("", "pids.max", strconv.Itoa(lim.pids)); err != nil {
				return err
			}
		}
		if ioLimits {
			line := device
			if lim.diskBPS > 0 {
				line += fmt.Sprintf(" rbps=%d wbps=%d", lim.diskBPS, lim.diskBPS)
			}
			if lim.diskIOPS > 0 {
				line += fmt.Sprintf(" riops=%d wiops=%d", lim.diskIOPS, lim.diskIOPS)
			}
			if err := set("", "io.max", line); err != nil {
				return err
			}
		}
		return nil
	}
	if lim.cpus > 0 {
		if err := set("cpu", "cpu.cfs_period_us", strconv.Itoa(cfsPeriod)); err != nil {
			return err
		}
		if err := set("cpu", "cpu.cfs_quota_us", strconv.Itoa(lim.cpus*cfsPeriod)); err != nil {
			return err
		}
	}
	if lim.memMiB > 0 {
		if err := set("memory", "memory.limit_in_bytes", strconv.FormatInt(int64(lim.memMiB)<<20, 10)); err != nil {
			return err
		}
	}
	if lim.pids > 0 {
		if err := set("pids", "pids.max", strconv.Itoa(lim.pids)); err != nil {
			return err
		}
	}
	if ioLimits {
		// v1 throttles what the sandbox's own tasks submit: reads, direct
		// writes and writes it syncs. Buffered writes the kernel's flusher
		// writes back later are charged to the root there (v2 charges
		// them to the sandbox).
		throttle := map[string]string{}
		if lim.diskBPS > 0 {
			bps := strconv.FormatInt(lim.diskBPS, 10)
			throttle["blkio.throttle.read_bps_device"] = bps
			throttle["blkio.throttle.write_bps_device"] = bps
		}
		if lim.diskIOPS > 0 {
			iops := strconv.Itoa(lim.diskIOPS)
			throttle["blkio.throttle.read_iops_device"] = iops
			throttle["blkio.throttle.write_iops_device"] = iops
		}
		for _, file := range slices.Sorted(maps.Keys(throttle)) {
			if err := set("blkio", file, device+" "+throttle[file]); err != nil {
				return err
			}
		}
	}
	return nil
}

// join moves a process (all its threads) into every hierarchy.
func (c *cgroup) join(pid int) error {
	for _, dir := range c.dirs {
		if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return fmt.Errorf("isolate: join cgroup %s: %w", dir, err)
		}
	}
	return nil
}

// freezeTimeout bounds how long a freeze may take to settle; a task stuck in
// an uninterruptible sleep can delay it.
const freezeTimeout = 10 * time.Second

// setFrozen freezes or thaws and waits until the kernel reports it done:
// both v1 and v2 freeze asynchronously.
func (c *cgroup) setFrozen(frozen bool) error {
	if c == nil || c.freezer == "" {
		return ErrNoFreezer
	}
	var ctlFile, value, stateFile string
	var done func(string) bool
	if c.v2 {
		ctlFile, stateFile = "cgroup.freeze", "cgroup.events"
		value = map[bool]string{true: "1", false: "0"}[frozen]
		want := "frozen " + value
		done = func(events string) bool {
			for _, l := range strings.Split(events, "\n") {
				if l == want {
					return true
				}
			}
			return false
		}
	} else {
		ctlFile, stateFile = "freezer.state", "freezer.state"
		value = map[bool]string{true: "FROZEN", false: "THAWED"}[frozen]
		done = func(state string) bool { return strings.TrimSpace(state) == value }
	}
	deadline := time.Now().Add(freezeTimeout)
	for delay := 100 * time.Microsecond; ; delay = min(2*delay, 10*time.Millisecond) {
		// v1 may stay FREEZING when a task was busy; writing again retries.
		if err := os.WriteFile(filepath.Join(c.freezer, ctlFile), []byte(value), 0); err != nil {
			return fmt.Errorf("isolate: write %s: %w", ctlFile, err)
		}
		st, err := os.ReadFile(filepath.Join(c.freezer, stateFile))
		if err != nil {
			return err
		}
		if done(string(st)) {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("isolate: cgroup %s did not reach %q in %v", c.freezer, value, freezeTimeout)
		}
		time.Sleep(delay)
	}
}

// remove deletes the cgroup's directories. The kernel refuses while a task
// is still leaving, so each is retried briefly.
func (c *cgroup) remove() error {
	if c == nil {
		return nil
	}
	var errs []error
	for ctl, dir := range c.dirs {
		var err error
		for i := 0; i < 200; i++ {
			err = os.Remove(dir)
			if err == nil || errors.Is(err, os.ErrNotExist) {
				err = nil
				break
			}
			time.Sleep(5 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("isolate: remove cgroup %s: %w", dir, err))
			continue
		}
		delete(c.dirs, ctl)
	}
	return errors.Join(errs...)
}

// CheckFrozen verifies that every task of the sandbox (threads included)
// is frozen, by each task's own state rather than the cgroup's word: the
// kernel shows a frozen task as in uninterruptible sleep ("D"), whatever
// it was doing when frozen. It returns an error naming a task that is
// not, or ErrNoFreezer.
func (s *Sandbox) CheckFrozen() error {
	c := s.cg
	if c == nil || c.freezer == "" {
		return ErrNoFreezer
	}
	tasksFile := "tasks"
	if c.v2 {
		tasksFile = "cgroup.threads"
	}
	b, err := os.ReadFile(filepath.Join(c.freezer, tasksFile))
	if err != nil {
		return fmt.Errorf("isolate: tasks of %s: %w", s.id, err)
	}
	ids := strings.Fields(string(b))
	if len(ids) == 0 {
		return fmt.Errorf("isolate: sandbox %s has no task", s.id)
	}
	for _, id := range ids {
		stat, err := os.ReadFile("/proc/" + id + "/stat")
		if err != nil {
			return fmt.Errorf("isolate: task %s of %s: %w", id, s.id, err)
		}
		// The state follows the command, which is in parentheses.
		i := bytes.LastIndexByte(stat, ')')
		if i < 0 || i+2 >= len(stat) {
			return fmt.Errorf("isolate: task %s of %s: unreadable stat", id, s.id)
		}
		if state := stat[i+2]; state != 'D' {
			return fmt.Errorf("isolate: task %s of sandbox %s is in state %c, not frozen", id, s.id, state)
		}
	}
	return nil
}
