package isolate

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// Runtime starts sandboxes under one state directory and cgroup parent.
type Runtime struct {
	stateDir string
	lock     *os.File // held while the runtime lives: see ReclaimStateDirs
	logger   *slog.Logger
	cg       *cgroups // nil: no cgroups
	rootless bool
	// userns: as root, each sandbox is its own user namespace over a
	// range of host ids (see userns_linux.go).
	userns bool

	mu        sync.Mutex
	sandboxes map[string]*Sandbox
}

// New checks that isolation works here and prepares StateDir and the cgroup
// parent.
func New(cfg Config) (*Runtime, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if cfg.StateDir == "" {
		return nil, errors.New("isolate: Config.StateDir is required")
	}
	stateDir, err := filepath.Abs(cfg.StateDir)
	if err != nil {
		return nil, err
	}
	if err := checkOverlayPath(stateDir); err != nil {
		return nil, err
	}
	// Private: writable layers may hold setuid files made by a sandbox's root.
	if err := os.MkdirAll(stateDir, 0o700); err != nil {
		return nil, fmt.Errorf("isolate: state dir: %w", err)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	userns := os.Geteuid() == 0
	lock, err := lockStateDir(stateDir)
	if err != nil {
		return nil, err
	}
	r := &Runtime{
		stateDir:  stateDir,
		lock:      lock,
		logger:    logger,
		rootless:  os.Geteuid() != 0,
		userns:    userns,
		sandboxes: map[string]*Sandbox{},
	}
	if cfg.CgroupParent != "" {
		if r.cg, err = newCgroups(cfg.CgroupParent, logger); err != nil {
			lock.Close()
			return nil, err
		}
		r.cg.reclaimStale()
	}
	return r, nil
}

// Lookup returns the open sandbox id.
func (r *Runtime) Lookup(id string) (*Sandbox, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s, ok := r.sandboxes[id]
	return s, ok
}

// HasFreezer reports whether sandboxes of this runtime can be frozen.
func (r *Runtime) HasFreezer() bool { return r.cg.hasFreezer() }

// Close closes every sandbox still open.
func (r *Runtime) Close() error {
	r.mu.Lock()
	all := make([]*Sandbox, 0, len(r.sandboxes))
	for _, s := range r.sandboxes {
		all = append(all, s)
	}
	r.mu.Unlock()
	var errs []error
	for _, s := range all {
		errs = append(errs, s.Close())
	}
	if r.cg != nil {
		r.cg.release()
	}
	r.lock.Close()
	return errors.Join(errs...)
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]{0,63}$`)

// Sandbox is one running sandbox.
type Sandbox struct {
	rt        *Runtime
	id        string
	dir       string
	upper     string
	relayAddr string
	dirFD     int // keeps relayAddr valid when it is a /proc/self/fd path; -1 if unused
	cmd       *exec.Cmd
	cg        *cgroup
	ids       *idRange // the host ids of its user namespace; nil without one
	disk      *os.File // the bounded disk's detached mount; nil without one

	exited  chan struct{} // closed when the init has been reaped
	waitErr error

	freezeMu sync.Mutex
	frozen   bool

	closeOnce sync.Once
	closed    chan struct{}
	closeErr  error
}

// Start creates the sandbox's directories and cgroup and starts its init,
// returning once the program has been started inside the finished root
// filesystem. It does not wait for the program to listen anywhere: Dial
// fails (and may be retried) until it does.
func (r *Runtime) Start(ctx context.Context, spec Spec) (_ *Sandbox, err error) {
	if !idPattern.MatchString(spec.ID) {
		return nil, fmt.Errorf("isolate: invalid sandbox id %q", spec.ID)
	}
	if _, ok := lookupProgram(spec.Program); !ok {
		return nil, fmt.Errorf("isolate: program %q is not registered", spec.Program)
	}
	hostname := spec.Hostname
	if hostname == "" {
		hostname = spec.ID
	}
	if len(hostname) > 64 {
		return nil, fmt.Errorf("isolate: hostname %q longer than 64 bytes", hostname)
	}
	rootfs, err := filepath.Abs(spec.RootFS)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(rootfs); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("isolate: root filesystem %q is not a directory", spec.RootFS)
	}
	if err := checkOverlayPath(rootfs); err != nil {
		return nil, err
	}
	layers, err := lowerLayers(spec.Layers)
	if err != nil {
		return nil, err
	}
	if err := checkMounts(spec.Mounts); err != nil {
		return nil, err
	}

	r.mu.Lock()
	if _, dup := r.sandboxes[spec.ID]; dup {
		r.mu.Unlock()
		return nil, fmt.Errorf("isolate: sandbox %q already exists", spec.ID)
	}
	s := &Sandbox{
		rt:     r,
		id:     spec.ID,
		dir:    filepath.Join(r.stateDir, spec.ID),
		dirFD:  -1,
		exited: make(chan struct{}),
		closed: make(chan struct{}),
	}
	r.sandboxes[spec.ID] = s
	r.mu.Unlock()
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()

	merged := filepath.Join(s.dir, "root")
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		// Close must not remove a directory that is not ours.
		s.dir = ""
		return nil, fmt.Errorf("isolate: sandbox dir: %w", err)
	}
	// The writable layer's upper and work directories share one
	// directory: the bounded disk, or a plain one.
	layer := filepath.Join(s.dir, "layer")
	var diskDev uint64 // the bounded disk's loop device, which the I/O limits name
	if spec.DiskMiB > 0 && r.rootless {
		// Mounting a filesystem image takes real root, like cgroups do.
		r.logger.Warn("isolate: not root; the disk bound is not applied", "sandbox", spec.ID)
	} else if spec.DiskMiB > 0 {
		if s.disk, diskDev, err = openLayerDisk(s.dir, spec.DiskMiB); err != nil {
			return nil, err
		}
		layer = "/proc/self/fd/" + strconv.Itoa(int(s.disk.Fd()))
	} else if err := os.Mkdir(layer, 0o755); err != nil {
		return nil, err
	}
	s.upper = filepath.Join(layer, "upper")
	for _, d := range []string{s.upper, filepath.Join(layer, "work"), merged} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return nil, err
		}
	}
	// What the init mounts from: the host's paths, or with a user
	// namespace the idmapped views of them the host hands over.
	roots := rootSources{Layer: layer, RootFS: rootfs, Layers: layers, Mounts: spec.Mounts}
	var views []idmappedView
	if r.userns {
		if roots, views, err = s.prepareViews(roots); err != nil {
			return nil, err
		}
	}
	if spec.From != "" {
		if err := copyLayer(spec.From, s.upper); err != nil {
			return nil, fmt.Errorf("isolate: start from %s: %w", spec.From, err)
		}
	}
	if r.cg != nil {
		lim := limits{cpus: spec.CPUCount, memMiB: spec.MemoryMiB, pids: spec.maxPIDs(),
			disk: diskDev, diskBPS: spec.DiskBytesPerSec, diskIOPS: spec.DiskIOPS}
		if diskDev == 0 && (spec.DiskBytesPerSec > 0 || spec.DiskIOPS > 0) {
			r.logger.Warn("isolate: I/O limits need a bounded disk (DiskMiB); not applied", "sandbox", spec.ID)
		}
		if s.cg, err = r.cg.create(spec.ID, lim); err != nil {
			return nil, err
		}
	} else if spec.CPUCount > 0 || spec.MemoryMiB > 0 || spec.MaxPIDs > 0 || spec.DiskBytesPerSec > 0 || spec.DiskIOPS > 0 {
		r.logger.Warn("isolate: no cgroup parent configured; CPU, memory, pids and I/O limits not applied", "sandbox", spec.ID)
	}

	relay, err := s.listenRelay()
	if err != nil {
		return nil, err
	}
	defer relay.Close()

	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer specR.Close()
	defer specW.Close()
	statusR, statusW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer statusR.Close()
	defer statusW.Close()

	cmd := exec.Command("/proc/self/exe")
	cmd.Args = []string{"isolate-init:" + spec.ID}
	// The Go runtime would keep the CPU limit files of the cgroup it
	// starts in open for its lifetime (cgroup-aware GOMAXPROCS): the
	// host's cgroup here, and the program's would be the sandbox's own,
	// writable through /proc/<pid>/fd by root inside. Switched off, the
	// runtime reads them once at startup and closes them.
	cmd.Env = []string{envStage + "=" + stageInit, noCgroupFDs}
	cmd.Stdout, cmd.Stderr = spec.Stdout, spec.Stderr
	cmd.ExtraFiles = []*os.File{specR, statusW, relay} // fds 3, 4, 5
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags: unix.CLONE_NEWNS | unix.CLONE_NEWPID | unix.CLONE_NEWNET | unix.CLONE_NEWUTS | unix.CLONE_NEWIPC,
		// The sandbox must not outlive a crashed host process.
		Pdeathsig: syscall.SIGKILL,
		// Its own session: a terminal's ^C to the host does not reach it.
		Setsid: true,
	}
	var attachSock *os.File
	if r.userns {
		// The ids are mapped before the init execs, so that it is root,
		// with its capabilities, in its namespace.
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		idMap := []syscall.SysProcIDMap{{ContainerID: 0, HostID: int(s.ids.base), Size: idRangeSize}}
		cmd.SysProcAttr.UidMappings, cmd.SysProcAttr.GidMappings = idMap, idMap
		cmd.SysProcAttr.GidMappingsEnableSetgroups = true
		// Mapped is not enough: the init starts as the host's root, which
		// is nobody in its namespace, until it takes root's ids there.
		cmd.SysProcAttr.Credential = &syscall.Credential{Uid: 0, Gid: 0}
		pair, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("isolate: attach socket: %w", err)
		}
		attachSock = os.NewFile(uintptr(pair[0]), "attach")
		initSock := os.NewFile(uintptr(pair[1]), "attach")
		defer attachSock.Close()
		defer initSock.Close()
		cmd.ExtraFiles = append(cmd.ExtraFiles, initSock) // fd 6
		merged = filepath.Base(merged)                    // relative: the init works from the sandbox directory
	}
	if r.rootless {
		cmd.SysProcAttr.Cloneflags |= unix.CLONE_NEWUSER
		cmd.SysProcAttr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}}
		cmd.SysProcAttr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}}
		cmd.SysProcAttr.GidMappingsEnableSetgroups = false
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("isolate: start init: %w", err)
	}
	s.cmd = cmd
	go func() {
		s.waitErr = cmd.Wait()
		close(s.exited)
	}()
	specR.Close()
	statusW.Close()
	relay.Close()

	// The init blocks reading its spec, so it joins the cgroup before it
	// (or anything it starts) runs any sandbox code.
	if s.cg != nil {
		if err := s.cg.join(cmd.Process.Pid); err != nil {
			return nil, err
		}
	}
	if r.userns {
		fds, err := openIdmapped(cmd.Process.Pid, views)
		if err != nil {
			return nil, err
		}
		if err := attachViews(cmd.Process.Pid, s.dir, views, fds, attachSock); err != nil {
			return nil, err
		}
	}
	raw, err := json.Marshal(initSpec{
		ID: spec.ID, Hostname: hostname, RootFS: roots.RootFS, Layers: roots.Layers,
		Upper: filepath.Join(roots.Layer, "upper"), Work: filepath.Join(roots.Layer, "work"), Merged: merged,
		User: spec.User, Program: spec.Program, Config: spec.Config, CPUCount: spec.CPUCount,
		Rootless: r.rootless, UserNS: r.userns || r.rootless, Views: r.userns,
		Mounts: roots.Mounts, TmpfsMiB: spec.tmpfsMiB(),
	})
	if err != nil {
		return nil, err
	}
	if _, err := specW.Write(raw); err != nil {
		return nil, fmt.Errorf("isolate: send spec: %w", err)
	}
	specW.Close()

	type statusResult struct {
		st  initStatus
		err error
	}
	ch := make(chan statusResult, 1)
	go func() {
		var res statusResult
		res.err = json.NewDecoder(statusR).Decode(&res.st)
		ch <- res
	}()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case res := <-ch:
		if res.err != nil {
			<-s.exited
			return nil, fmt.Errorf("isolate: sandbox %s: init ended during setup: %v", spec.ID, s.waitErr)
		}
		if res.st.Error != "" {
			return nil, fmt.Errorf("isolate: sandbox %s: setup: %s", spec.ID, res.st.Error)
		}
	}
	r.logger.Debug("isolate: sandbox started", "sandbox", spec.ID, "pid", cmd.Process.Pid)
	return s, nil
}

// unixPathMax is the size of sun_path; longer socket paths go through a
// directory descriptor.
const unixPathMax = 108

// listenRelay creates the relay's listening socket in the sandbox directory
// and returns it as a file for the init. The host keeps no listener: the
// socket stays open only in the init, so it dies with the sandbox.
func (s *Sandbox) listenRelay() (*os.File, error) {
	path := filepath.Join(s.dir, "relay.sock")
	s.relayAddr = path
	if len(path) >= unixPathMax {
		fd, err := unix.Open(s.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, err
		}
		s.dirFD = fd
		s.relayAddr = "/proc/self/fd/" + strconv.Itoa(fd) + "/relay.sock"
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: s.relayAddr, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("isolate: relay socket: %w", err)
	}
	l.SetUnlinkOnClose(false)
	f, err := l.File()
	l.Close()
	if err != nil {
		return nil, err
	}
	return f, nil
}

// ID returns the sandbox's id.
func (s *Sandbox) ID() string { return s.id }

// PID returns the host pid of the sandbox's init (0 before it started).
func (s *Sandbox) PID() int {
	if s.cmd == nil || s.cmd.Process == nil {
		return 0
	}
	return s.cmd.Process.Pid
}

// LayerDir is the host path of the writable layer (the overlay's upper
// directory): everything written inside outside /tmp and /dev/shm lands
// here. With a bounded disk it is a /proc/self/fd path, valid in this
// process until Close. Read it while the sandbox is frozen for a
// consistent view; never write it while the sandbox runs.
func (s *Sandbox) LayerDir() string { return s.upper }

// Dir is the sandbox's directory on the host (StateDir/<id>): its writable
// layer (or the image of its bounded disk), its relay socket and the
// mount points of its root. Close removes it.
func (s *Sandbox) Dir() string { return s.dir }

// RelaySocket is the host path of the relay's unix socket (see Dial).
func (s *Sandbox) RelaySocket() string { return filepath.Join(s.dir, "relay.sock") }

// Done is closed when the sandbox's init has exited (its program ended, it
// was killed, or Close).
func (s *Sandbox) Done() <-chan struct{} { return s.exited }

// Err is how the init exited, once Done is closed; nil before.
func (s *Sandbox) Err() error {
	select {
	case <-s.exited:
		return s.waitErr
	default:
		return nil
	}
}

// Freeze stops every process of the sandbox (cgroup freezer); memory, files
// and sockets stay as they are until Thaw.
func (s *Sandbox) Freeze() error { return s.setFrozen(true) }

// Thaw resumes a frozen sandbox.
func (s *Sandbox) Thaw() error { return s.setFrozen(false) }

func (s *Sandbox) setFrozen(frozen bool) error {
	select {
	case <-s.closed:
		return ErrClosed
	default:
	}
	s.freezeMu.Lock()
	defer s.freezeMu.Unlock()
	if err := s.cg.setFrozen(frozen); err != nil {
		return err
	}
	s.frozen = frozen
	return nil
}

// Close kills every process of the sandbox (SIGKILL to its init ends the
// whole PID namespace), waits for the init, removes the cgroup and deletes
// the sandbox directory with its writable layer. The overlay and the other
// mounts lived only in the sandbox's mount namespace, which the kernel
// tears down with its last process. Close is idempotent and safe to call
// concurrently.
func (s *Sandbox) Close() error {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.closeErr = s.close()
		s.rt.mu.Lock()
		delete(s.rt.sandboxes, s.id)
		s.rt.mu.Unlock()
	})
	return s.closeErr
}

func (s *Sandbox) close() error {
	var errs []error
	if s.cmd != nil {
		_ = s.cmd.Process.Signal(syscall.SIGKILL)
		// A v1-frozen task does not act on SIGKILL until thawed.
		s.freezeMu.Lock()
		if s.frozen {
			_ = s.cg.setFrozen(false)
			s.frozen = false
		}
		s.freezeMu.Unlock()
		<-s.exited
	}
	if err := s.cg.remove(); err != nil {
		errs = append(errs, err)
	}
	s.ids.release()
	if s.disk != nil {
		s.disk.Close()
	}
	if s.dirFD >= 0 {
		unix.Close(s.dirFD)
		s.dirFD = -1
	}
	if s.dir != "" {
		if err := detachMountsUnder(s.dir); err != nil {
			errs = append(errs, err)
		}
		if err := os.RemoveAll(s.dir); err != nil {
			errs = append(errs, fmt.Errorf("isolate: remove %s: %w", s.dir, err))
		}
	}
	return errors.Join(errs...)
}

// detachMountsUnder lazily unmounts anything mounted under dir in the host's
// mount namespace. Nothing should be (the sandbox mounts privately), but a
// host whose mounts propagate unexpectedly must neither keep a stray overlay
// nor let RemoveAll descend into a shared root filesystem.
func detachMountsUnder(dir string) error {
	mps, err := mountPoints()
	if err != nil {
		return err
	}
	var errs []error
	for i := len(mps) - 1; i >= 0; i-- { // children after parents in mountinfo
		mp := mps[i]
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			if err := unix.Unmount(mp, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errs = append(errs, fmt.Errorf("isolate: unmount %s: %w", mp, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountPoints lists the mount points of the calling process's mount
// namespace, in /proc/self/mountinfo order.
func mountPoints() ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		out = append(out, unescapeOctal(f[4]))
	}
	return out, nil
}

// unescapeOctal undoes mountinfo's \ooo escaping of spaces and the like.
func unescapeOctal(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
