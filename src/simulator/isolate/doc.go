// Package isolate runs each simulated sandbox in its own Linux namespaces over
// its own root filesystem: the namespace runtime behind the simulator's
// sandboxes (issue 14).
//
// # Model
//
// Start re-executes the current binary (/proc/self/exe) with new mount, PID,
// network, UTS, IPC and user namespaces. That process is the sandbox's
// init, PID 1 of its PID namespace. As root, its user namespace maps ids
// 0-65535 to a host range no other sandbox holds (userns_linux.go), and the
// host hands it idmapped mounts of the root filesystem, its layers, the
// writable layer and the volumes (placed in the init's mount namespace by a
// short-lived attach helper), so files keep their on-disk owners inside.
// Not root, the namespace maps only the caller's id. Before anything else
// the init:
//
//   - makes every mount private, so nothing it mounts propagates to the host;
//   - mounts an overlay (lower = Spec.Layers over Spec.RootFS, shared
//     read-only by every sandbox; upper and work under StateDir/<id>, on
//     an ext4 image of Spec.DiskMiB when that is set) and,
//     on it, a fresh /proc
//     (with /proc/sys and the other host-wide knobs read-only or masked), a
//     minimal /dev (null, zero, full, random, urandom, tty, ptmx with its own
//     devpts, /dev/shm) and a tmpfs /tmp;
//   - sets the hostname and brings up its own loopback;
//   - starts the registered program, its only child (re-executing the binary again,
//     before pivot_root so a dynamically linked binary still finds its host
//     libraries), then pivot_root's into the overlay and detaches the old
//     root, so nothing of the host's filesystem stays reachable.
//
// The program runs as root inside, with the capabilities that reach beyond
// the sandbox (module loading, raw I/O, mount, mknod, ptrace, the clock,
// open_by_handle_at, nice and resource limits, network administration and
// raw sockets, …) removed from its bounding set, so neither it nor anything
// it starts (sudo included) can get them back, and under a seccomp filter
// (seccomp_linux.go) that refuses the kernel keyrings, new namespaces,
// mounting, module loading and similar calls. The init and the program are non-dumpable (root inside can neither
// ptrace them nor open their /proc/<pid>/fd, mem or environ) and hold no
// descriptor on a cgroup file: the Go runtime's cgroup-aware GOMAXPROCS,
// which would keep the CPU limit files open, is switched off for both
// (GODEBUG=containermaxprocs=0; the program gets GOMAXPROCS from
// Spec.CPUCount instead), and each stage checks at startup that no such
// descriptor is open. Commands it starts
// with [Command] run as Spec.User with that user's HOME, USER, PATH and
// working directory. PID 1 reaps orphans and serves a relay on a unix socket
// in StateDir/<id>: per connection it reads a port and splices to
// 127.0.0.1:port inside the sandbox's network namespace, which is how
// [Sandbox.Dial] reaches guest ports without setns. The host's loopback is
// not reachable from inside (different network namespace).
//
// The overlay and every other mount exist only in the sandbox's mount
// namespace, so they vanish when its last process dies; [Sandbox.Close]
// kills PID 1 (the kernel then kills the whole PID namespace), waits for it,
// removes the cgroup and deletes StateDir/<id>.
//
// With a CgroupParent each sandbox gets its own cgroup: CPU (Spec.CPUCount
// quota periods), memory (Spec.MemoryMiB) and tasks (Spec.MaxPIDs, by
// default PIDsPerCPU per CPU: 512 for the small tier), so a fork bomb
// inside gets EAGAIN once the sandbox holds that many processes and
// threads. A sandbox with a bounded disk also gets its disk's rate
// (Spec.DiskBytesPerSec, Spec.DiskIOPS) through the blkio or io
// controller on its loop device, so one sandbox's disk traffic cannot
// take the host disk from its neighbours.
//
// # Pause, fork and checkpoint
//
// [Sandbox.Freeze] and [Sandbox.Thaw] use the cgroup freezer (v1
// freezer.state, v2 cgroup.freeze): processes stop and keep their memory.
// [Sandbox.SaveLayer] copies the writable layer (every file written, created
// or deleted inside, with owners, modes, times, xattrs and overlay whiteouts);
// Spec.From starts a new sandbox from such a copy. Processes, memory, open
// files, sockets and the tmpfs mounts (/tmp, /dev/shm) are not kept: a fork
// or a restored checkpoint boots fresh over the saved files.
//
// # Cost
//
// BenchmarkStartDial measures Start up to the first successful Dial of a
// listener the program opens (the preparation a warm pool pays before a
// claim); docs/simulator.md has the figures. Close is a few milliseconds
// more, off the claim path.
//
// # Limits
//
//   - Linux only; elsewhere [Available] and [New] return errors.
//   - Not a VM-grade boundary: the kernel is shared (a bug reachable
//     through an allowed call crosses it); there is no devices cgroup.
//   - On cgroup v1 the disk rate holds for what the sandbox's tasks
//     submit themselves (reads, direct and synced writes); buffered
//     writes the kernel's flusher writes back later are charged to the
//     host's root cgroup and escape it. The disk bound still caps their
//     volume. cgroup v2 charges writeback to the sandbox.
//   - A Go program inside (the program itself) aborts if it cannot create
//     a thread, so a sandbox at its pids limit can lose its program; the
//     limit bounds the host, not the sandbox's own stability.
//   - Without root, the user namespace maps only the caller's uid and gid
//     (to root inside), so Spec.User's uid cannot be switched to: commands
//     run as that mapped root with the user's HOME and USER. Cgroups need
//     delegation there (pass an empty CgroupParent), and the disk bound is
//     not applied.
//   - cgroup v2 is implemented (cpu.max, memory.max, pids.max, io.max,
//     cgroup.freeze) but was only tested on cgroup v1 (the development VM).
package isolate
