package isolate

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The re-executed binary learns its role from the environment: the host
// starts it with a clean environment holding only these variables, so an
// ordinary run of the binary never sees them.
const (
	envStage   = "ISOLATE_STAGE"
	envProgram = "ISOLATE_PROGRAM"
	envProbe   = "ISOLATE_PROBE_DIR"

	// noCgroupFDs is in the environment of the init and the program: see
	// Start, and checkNoCgroupFDs, which makes sure of it.
	noCgroupFDs = "GODEBUG=containermaxprocs=0"

	stageInit    = "init"    // PID 1: namespace setup, relay, reaper
	stageProgram = "program" // the init's child: the registered program
	stageProbe   = "probe"   // Available's trial run
	stageAttach  = "attach"  // the host's helper placing a sandbox's idmapped views
)

// File descriptors the host hands to the init, and the init to the program.
const (
	fdSpec   = 3 // host → init: the initSpec, JSON
	fdStatus = 4 // init → host: one initStatus, JSON, then EOF
	fdRelay  = 5 // host → init: the relay's listening unix socket
	fdAttach = 6 // attach stage → init, as root: the sandbox directory (SCM_RIGHTS)
	fdConfig = 3 // init → program: the programEnvelope, JSON, after pivot_root
	fdReady  = 4 // program → init: one byte once the program's binary is loaded
)

// initCalled lets Available and New refuse to start sandboxes in a binary
// whose main never calls Init: the re-executed child would run main instead.
var initCalled atomic.Bool

// initSpec is everything the init needs, sent over fdSpec.
type initSpec struct {
	ID       string
	Hostname string
	RootFS   string
	Layers   []string // over RootFS, the first on top
	Upper    string
	Work     string
	Merged   string
	User     string
	Program  string
	Config   []byte
	Rootless bool
	// UserNS: the init is in a user namespace (Rootless, or as root with
	// an id range), so it mounts as an unprivileged overlay and binds the
	// host's device nodes.
	UserNS bool
	// Views: as root, the host attached idmapped views of the trees the
	// paths below name, and the paths are relative to the sandbox
	// directory, which the init receives on fdAttach.
	Views    bool
	Mounts   []Mount
	CPUCount int // the program's GOMAXPROCS when > 0
	TmpfsMiB int // the size of /tmp and of /dev/shm
}

// initStatus reports the end of setup to the host.
type initStatus struct {
	Error string `json:",omitempty"`
}

// Init must be the first thing main (and TestMain of a package that starts
// sandboxes) does. In a process re-executed by the runtime it runs that
// stage and exits; otherwise it returns at once.
func Init() {
	initCalled.Store(true)
	switch os.Getenv(envStage) {
	case "":
		return
	case stageInit:
		runInit()
	case stageProgram:
		runProgram()
	case stageProbe:
		runProbe()
	case stageAttach:
		runAttach()
	default:
		fmt.Fprintf(os.Stderr, "isolate: unknown stage %q\n", os.Getenv(envStage))
	}
	os.Exit(2)
}

// runInit is PID 1 of the sandbox. It never returns.
func runInit() {
	status := os.NewFile(fdStatus, "status")
	// Signals from inside the sandbox must not end it: only the host's
	// SIGKILL does (the kernel already shields a namespace's init from
	// SIGKILL sent from inside).
	signal.Ignore(unix.SIGTERM, unix.SIGINT, unix.SIGHUP, unix.SIGQUIT, unix.SIGUSR1, unix.SIGUSR2, unix.SIGPIPE)
	// Root inside lacks capabilities the init keeps, which already bars
	// it from the init's /proc/1/{fd,mem,environ} and from ptrace; being
	// non-dumpable does so too should the capability sets ever match.
	if err := setNotDumpable(); err != nil {
		reportStatus(status, err)
		os.Exit(1)
	}
	if err := checkNoCgroupFDs(); err != nil {
		reportStatus(status, err)
		os.Exit(1)
	}
	child, err := setUp()
	if err != nil {
		reportStatus(status, err)
		os.Exit(1)
	}
	reportStatus(status, nil)
	code := reapUntil(child)
	os.Exit(code)
}

func reportStatus(f *os.File, err error) {
	var st initStatus
	if err != nil {
		st.Error = err.Error()
	}
	_ = json.NewEncoder(f).Encode(st)
	_ = f.Close()
}

// child is the started program: its pid, and the reaper's signal channel
// (subscribed before the fork so no SIGCHLD is missed).
type child struct {
	pid     int
	sigchld chan os.Signal
}

// setUp builds the sandbox around the init and starts the program.
func setUp() (*child, error) {
	raw, err := io.ReadAll(os.NewFile(fdSpec, "spec"))
	if err != nil {
		return nil, fmt.Errorf("read spec: %w", err)
	}
	var spec initSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return nil, fmt.Errorf("decode spec: %w", err)
	}
	relay, err := net.FileListener(os.NewFile(fdRelay, "relay"))
	if err != nil {
		return nil, fmt.Errorf("relay socket: %w", err)
	}
	if err := buildRoot(&spec); err != nil {
		return nil, err
	}
	if err := unix.Sethostname([]byte(spec.Hostname)); err != nil {
		return nil, fmt.Errorf("sethostname: %w", err)
	}
	if err := loopbackUp(); err != nil {
		return nil, err
	}
	user, err := lookupUser(spec.Merged, spec.User, spec.Rootless)
	if err != nil {
		return nil, err
	}
	if err := ensureHome(spec.Merged, user); err != nil {
		return nil, err
	}

	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	readyR, readyW, err := os.Pipe()
	if err != nil {
		cfgR.Close()
		cfgW.Close()
		return nil, err
	}
	c := &child{sigchld: make(chan os.Signal, 1)}
	signal.Notify(c.sigchld, unix.SIGCHLD)
	// The program is started before pivot_root so that the kernel and the
	// dynamic loader resolve the binary and its libraries on the host's
	// root; pivot_root then moves its root along with ours, and it waits
	// for its config (sent after the pivot) before doing anything. The
	// dynamic loader runs in the child after exec returns here, so the
	// pivot waits for the program's "loaded" byte: pivoting earlier would
	// let it load the sandbox's C library under a binary built against the
	// host's, which crashes when the two differ.
	c.pid, err = startProgram(spec.Program, spec.CPUCount, cfgR, readyW)
	cfgR.Close()
	readyW.Close()
	if err != nil {
		readyR.Close()
		cfgW.Close()
		return nil, err
	}
	if err := shieldFromOOM(filepath.Join(spec.Merged, "proc"), c.pid); err != nil {
		readyR.Close()
		cfgW.Close()
		return nil, err
	}
	_, err = readyR.Read(make([]byte, 1))
	readyR.Close()
	if err != nil {
		cfgW.Close()
		return nil, fmt.Errorf("program %q ended before it was loaded: %w", spec.Program, err)
	}
	if err := pivotInto(spec.Merged); err != nil {
		cfgW.Close()
		return nil, err
	}
	env := programEnvelope{Config: spec.Config, User: user}
	err = json.NewEncoder(cfgW).Encode(env)
	cfgW.Close()
	if err != nil {
		return nil, fmt.Errorf("send config to program: %w", err)
	}
	go serveRelay(relay)
	return c, nil
}

// startProgram forks the program with a reduced capability bounding set.
// The bounding set is per thread, so the drop and the fork happen on one
// locked thread, which is then discarded (never unlocked) so no other
// goroutine inherits the reduced set.
func startProgram(name string, cpus int, cfg, ready *os.File) (int, error) {
	env := []string{
		envStage + "=" + stageProgram,
		envProgram + "=" + name,
		noCgroupFDs,
		"PATH=" + defaultPath,
		"HOME=/root",
	}
	// With containermaxprocs off the runtime would size GOMAXPROCS to
	// the host's CPUs; this is what it would have read from the quota
	// (rounded up, at least 2).
	if cpus > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(max(cpus, 2)))
	}
	type result struct {
		pid int
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		// Deliberately no UnlockOSThread: the thread exits with the goroutine.
		if err := dropBoundingCaps(); err != nil {
			ch <- result{err: err}
			return
		}
		if err := installSeccomp(); err != nil {
			ch <- result{err: err}
			return
		}
		devnull, err := os.Open(os.DevNull)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer devnull.Close()
		pid, err := syscallForkExec("/proc/self/exe", []string{"isolate-program"}, env,
			[]uintptr{devnull.Fd(), os.Stdout.Fd(), os.Stderr.Fd(), cfg.Fd(), ready.Fd()})
		ch <- result{pid, err}
	}()
	r := <-ch
	if r.err != nil {
		return 0, fmt.Errorf("start program %q: %w", name, r.err)
	}
	return r.pid, nil
}

// reapUntil is PID 1's duty: it collects every process that ends in the
// sandbox (orphans are reparented to it) and returns the program's exit code
// once the program ends, which ends the sandbox.
func reapUntil(c *child) int {
	for range c.sigchld {
		for {
			var ws unix.WaitStatus
			pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if err != nil || pid <= 0 {
				break
			}
			if pid == c.pid {
				switch {
				case ws.Exited():
					return ws.ExitStatus()
				case ws.Signaled():
					return 128 + int(ws.Signal())
				}
				return 1
			}
		}
	}
	return 1
}

// setNotDumpable makes the calling process non-dumpable: without
// CAP_SYS_PTRACE no other process may ptrace it or open its
// /proc/<pid>/{fd,mem,environ,maps}, though it runs as the same uid. An
// execve resets it, so each stage sets it for itself.
func setNotDumpable() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return nil
}

// checkNoCgroupFDs fails if the calling process has a descriptor open on a
// cgroup filesystem. The sandbox mounts no cgroup filesystem, so such a
// descriptor can only come from the host (the Go runtime opens the CPU
// limit files at startup, before pivot_root, unless noCgroupFDs is set),
// and through /proc/<pid>/fd it would let root inside rewrite the
// sandbox's own limits.
func checkNoCgroupFDs() error {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("list descriptors: %w", err)
	}
	var open []string
	for _, e := range ents {
		p := "/proc/self/fd/" + e.Name()
		var st unix.Statfs_t
		// ENOENT: the descriptor ReadDir used, closed since.
		if err := unix.Statfs(p, &st); err != nil {
			continue
		}
		if st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC {
			target, _ := os.Readlink(p)
			open = append(open, e.Name()+" -> "+target)
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("descriptors open on the host's cgroup files: %v", open)
	}
	return nil
}

// OOM scores of the sandbox's own processes. When a sandbox runs out of
// memory the kernel kills inside its cgroup, choosing by size and score.
// The init's end is the sandbox's, so the program (and with it everything
// it starts, which inherits its score) is made the likelier victim of the
// two, whatever their sizes; among the program and its commands the one
// holding the memory is still the one killed. Raising a score needs no
// privilege. Where the host also grants CAP_SYS_RESOURCE the init is
// exempted outright.
const (
	initOOMScoreAdj    = -1000
	programOOMScoreAdj = 500
)

// shieldFromOOM sets the program's OOM score, and the init's where the
// host allows lowering one. proc is the sandbox's own /proc (the pids are
// its PID namespace's; the host's /proc, still the init's before the
// pivot, numbers other processes).
func shieldFromOOM(proc string, program int) error {
	p := filepath.Join(proc, strconv.Itoa(program), "oom_score_adj")
	if err := os.WriteFile(p, []byte(strconv.Itoa(programOOMScoreAdj)), 0); err != nil {
		return fmt.Errorf("set the program's OOM score: %w", err)
	}
	err := os.WriteFile(filepath.Join(proc, "1", "oom_score_adj"), []byte(strconv.Itoa(initOOMScoreAdj)), 0)
	if err != nil && !errors.Is(err, os.ErrPermission) {
		return fmt.Errorf("set the init's OOM score: %w", err)
	}
	return nil
}
