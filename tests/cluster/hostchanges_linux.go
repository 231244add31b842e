package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// cgroupV1Root is where these machines mount their cgroup v1 hierarchies.
const cgroupV1Root = "/sys/fs/cgroup"

// kubeletSysctls are the machine-wide (not per-namespace) kernel settings
// the kubelet's container manager writes at start. They are saved first
// and put back at stop, so a test cluster leaves the machine as it was.
var kubeletSysctls = []string{
	"vm/overcommit_memory",
	"vm/panic_on_oom",
	"kernel/panic",
	"kernel/panic_on_oops",
	"kernel/keys/root_maxkeys",
	"kernel/keys/root_maxbytes",
}

// hostChanges records what a node cluster changes outside its namespaces
// and its directory: one cgroup subtree per v1 hierarchy (the kubelet's
// --cgroup-root, under which it puts every pod) and the kubelet's sysctls.
type hostChanges struct {
	cgroupRoot string            // e.g. /sandbox-operator-1234, in every hierarchy
	cgroupDirs []string          // the subtree's top in each hierarchy
	sysctls    map[string]string // saved values
}

// prepareHost saves the kubelet's sysctls and makes cgroupRoot in every
// cgroup v1 hierarchy (the kubelet refuses a --cgroup-root that does not
// exist). cpuset children start with no CPUs or memory nodes, so the
// parent's are copied in.
func prepareHost(cgroupRoot string) (*hostChanges, error) {
	h := &hostChanges{cgroupRoot: cgroupRoot, sysctls: map[string]string{}}
	for _, key := range kubeletSysctls {
		b, err := os.ReadFile(filepath.Join("/proc/sys", key))
		if err != nil {
			continue // not on this kernel: nothing to restore
		}
		h.sysctls[key] = strings.TrimSpace(string(b))
	}
	hierarchies, err := os.ReadDir(cgroupV1Root)
	if err != nil {
		return h, fmt.Errorf("cgroups: %w", err)
	}
	for _, e := range hierarchies {
		top := filepath.Join(cgroupV1Root, e.Name())
		if _, err := os.Stat(filepath.Join(top, "cgroup.procs")); err != nil {
			continue // a symlink (cpu,cpuacct) or not a hierarchy
		}
		dir := filepath.Join(top, cgroupRoot)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return h, fmt.Errorf("cgroups: %w", err)
		}
		h.cgroupDirs = append(h.cgroupDirs, dir)
		if e.Name() == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(top, f))
				if err != nil {
					return h, fmt.Errorf("cgroups: %w", err)
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return h, fmt.Errorf("cgroups: %w", err)
				}
			}
		}
	}
	if len(h.cgroupDirs) == 0 {
		return h, errors.New("cgroups: no cgroup v1 hierarchy under " + cgroupV1Root)
	}
	return h, nil
}

// restore puts the sysctls back and removes the cgroup subtrees, deepest
// first. It runs after every process of the cluster has exited; a cgroup
// that still holds a process cannot be removed and is reported.
func (h *hostChanges) restore() error {
	if h == nil {
		return nil
	}
	var errs []error
	for key, v := range h.sysctls {
		p := filepath.Join("/proc/sys", key)
		if cur, err := os.ReadFile(p); err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(p, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore sysctl %s: %w", key, err))
		}
	}
	for _, top := range h.cgroupDirs {
		var dirs []string
		_ = filepath.WalkDir(top, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs) // children before parents
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}
