//go:build linux

package isolate_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// The test binary is also every sandbox's init and program (re-executed via
// /proc/self/exe) and, through helperEnv, the command the program starts
// with isolate.Command.
const helperEnv = "ISOLATE_TEST_HELPER"

// helperArgEnv carries a limitHelpers helper's argument.
const helperArgEnv = "ISOLATE_TEST_HELPER_ARG"

var (
	rootFS       string // the tiny lower root filesystem shared by every test
	cgroupParent string
)

func TestMain(m *testing.M) {
	isolate.Init()
	switch os.Getenv(helperEnv) {
	case "":
	case "id":
		wd, _ := os.Getwd()
		fmt.Printf("uid=%d gid=%d cwd=%s HOME=%s USER=%s\n", os.Getuid(), os.Getgid(), wd, os.Getenv("HOME"), os.Getenv("USER"))
		if err := os.WriteFile(filepath.Join(os.Getenv("HOME"), "from-user.txt"), []byte("mine"), 0o644); err != nil {
			fmt.Println("write:", err)
		}
		os.Exit(0)
	case "orphan":
		// Start a grandchild that outlives this process and exits once
		// it has: it is reparented to the sandbox's PID 1, which must
		// reap it. The grandchild reads a pipe only this process writes,
		// so its EOF is this process's exit. Prints the grandchild's pid.
		r, w, err := os.Pipe()
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		cmd := exec.Command("/proc/self/exe")
		cmd.Env = []string{helperEnv + "=exit"}
		cmd.Stdin = r
		if err := cmd.Start(); err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		_ = r.Close()
		fmt.Println(cmd.Process.Pid)
		runtime.KeepAlive(w) // open until this exit, the grandchild's EOF
		os.Exit(0)
	case "exit":
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	default:
		if fn, ok := limitHelpers[os.Getenv(helperEnv)]; ok {
			fn(os.Getenv(helperArgEnv))
			os.Exit(0)
		}
	}
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var err error
	rootFS, err = makeRootFS()
	if err != nil {
		fmt.Fprintln(os.Stderr, "make rootfs:", err)
		return 1
	}
	defer os.RemoveAll(filepath.Dir(rootFS))
	cgroupParent = fmt.Sprintf("isolate-test-%d", os.Getpid())
	defer removeCgroupParent(cgroupParent)
	return m.Run()
}

// makeRootFS builds a tiny root filesystem: passwd and group with "user",
// a home, a marker file, and the shared libraries the (possibly cgo, so
// dynamically linked) test binary needs when the program execs it again
// through isolate.Command after pivot_root.
func makeRootFS() (string, error) {
	top, err := os.MkdirTemp("", "isolate-rootfs-")
	if err != nil {
		return "", err
	}
	root := filepath.Join(top, "root")
	for _, d := range []string{"etc", "home/user", "root", "proc", "dev", "tmp"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			return "", err
		}
	}
	files := map[string]string{
		"etc/passwd":    "root:x:0:0:root:/root:/bin/sh\nuser:x:1000:1000:user:/home/user:/bin/bash\n",
		"etc/group":     "root:x:0:\nsudo:x:27:user\nuser:x:1000:\n",
		"rootfs-marker": "from the template\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(root, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Chown(filepath.Join(root, "home/user"), 1000, 1000); err != nil {
		return "", err
	}
	if err := os.Chmod(filepath.Join(root, "tmp"), 0o1777); err != nil {
		return "", err
	}
	exe, err := os.Executable()
	if err != nil {
		return "", err
	}
	out, err := exec.Command("ldd", exe).Output()
	if err != nil {
		return root, nil // static binary (or no ldd): nothing to copy
	}
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		var lib string
		switch {
		case len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/"):
			lib = f[2]
		case len(f) >= 1 && strings.HasPrefix(f[0], "/"):
			lib = f[0]
		default:
			continue
		}
		data, err := os.ReadFile(lib)
		if err != nil {
			return "", err
		}
		dst := filepath.Join(root, lib)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(dst, data, 0o755); err != nil {
			return "", err
		}
	}
	return root, nil
}

func removeCgroupParent(parent string) {
	for _, ctl := range []string{"freezer", "memory", "cpu", "pids", ""} {
		_ = os.Remove(filepath.Join("/sys/fs/cgroup", ctl, parent))
	}
}

// --- the program every test sandbox runs ---

type probeConfig struct {
	Port int
	Tag  string
}

type request struct {
	Op, Path, Data, Addr string
}

type response struct {
	Out string
	Err string
}

func init() {
	isolate.Register("probe", runProbeProgram)
}

// runProbeProgram serves one JSON request per line on 127.0.0.1:Port and
// keeps a counter file ticking in /home/user, for the freezer test.
func runProbeProgram(ctx context.Context, raw []byte) error {
	var cfg probeConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return err
	}
	go func() {
		for n := 0; ; n++ {
			_ = os.WriteFile("/home/user/counter", []byte(strconv.Itoa(n)), 0o644)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)))
	if err != nil {
		return err
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return err
		}
		go func() {
			defer c.Close()
			sc := bufio.NewScanner(c)
			enc := json.NewEncoder(c)
			for sc.Scan() {
				var req request
				if err := json.Unmarshal(sc.Bytes(), &req); err != nil {
					return
				}
				out, err := handle(ctx, cfg, req)
				resp := response{Out: out}
				if err != nil {
					resp.Err = err.Error()
				}
				_ = enc.Encode(resp)
			}
		}()
	}
}

func handle(ctx context.Context, cfg probeConfig, req request) (string, error) {
	switch req.Op {
	case "tag":
		return cfg.Tag, nil
	case "hostname":
		return os.Hostname()
	case "ls":
		ents, err := os.ReadDir(req.Path)
		if err != nil {
			return "", err
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return strings.Join(names, " "), nil
	case "read":
		b, err := os.ReadFile(req.Path)
		return string(b), err
	case "write":
		return "", os.WriteFile(req.Path, []byte(req.Data), 0o644)
	case "remove":
		return "", os.Remove(req.Path)
	case "dial":
		c, err := net.DialTimeout("tcp", req.Addr, time.Second)
		if err != nil {
			return "", err
		}
		c.Close()
		return "connected", nil
	case "helper":
		// Data names one of limitHelpers, Path is its argument; it runs
		// as the sandbox's user.
		cmd := isolate.Command(ctx, "/proc/self/exe")
		cmd.Env = append(cmd.Env, helperEnv+"="+req.Data, helperArgEnv+"="+req.Path)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	case "id", "orphan":
		cmd := isolate.Command(ctx, "/proc/self/exe")
		cmd.Env = append(cmd.Env, helperEnv+"="+req.Op)
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	case "zombies":
		ents, _ := os.ReadDir("/proc")
		var zs []string
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err != nil {
				continue
			}
			st, err := os.ReadFile("/proc/" + e.Name() + "/stat")
			if err != nil {
				continue
			}
			if f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:])); len(f) > 0 && f[0] == "Z" {
				zs = append(zs, e.Name())
			}
		}
		return strings.Join(zs, " "), nil
	case "pids":
		ents, _ := os.ReadDir("/proc")
		var ps []string
		for _, e := range ents {
			if _, err := strconv.Atoi(e.Name()); err == nil {
				ps = append(ps, e.Name())
			}
		}
		return strings.Join(ps, " "), nil
	}
	return "", fmt.Errorf("unknown op %q", req.Op)
}

// --- host-side helpers ---

const port = 8000

var seq atomic.Int64

func newRuntime(t testing.TB, cgroups bool) *isolate.Runtime {
	t.Helper()
	cfg := isolate.Config{StateDir: filepath.Join(t.TempDir(), "state")}
	if cgroups {
		cfg.CgroupParent = cgroupParent
	}
	rt, err := isolate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func start(t testing.TB, rt *isolate.Runtime, tag string, mod func(*isolate.Spec)) *isolate.Sandbox {
	t.Helper()
	cfg, _ := json.Marshal(probeConfig{Port: port, Tag: tag})
	spec := isolate.Spec{
		ID:       fmt.Sprintf("sb-%s-%d", tag, seq.Add(1)),
		Hostname: "host-" + tag,
		RootFS:   rootFS,
		User:     "user",
		Program:  "probe",
		Config:   cfg,
		Stderr:   os.Stderr,
	}
	if mod != nil {
		mod(&spec)
	}
	sb, err := rt.Start(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// dialReady dials port inside, retrying while the program is still starting.
func dialReady(ctx context.Context, sb *isolate.Sandbox, port int) (net.Conn, error) {
	for {
		c, err := sb.Dial(ctx, port)
		if err == nil {
			return c, nil
		}
		if ctx.Err() != nil {
			return nil, err
		}
		select {
		case <-sb.Done():
			return nil, fmt.Errorf("sandbox ended: %v (dial: %v)", sb.Err(), err)
		case <-time.After(time.Millisecond):
		}
	}
}

// call sends one request to the sandbox's probe program.
func call(t testing.TB, sb *isolate.Sandbox, req request) response {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dialReady(ctx, sb, port)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	b, _ := json.Marshal(req)
	if _, err := c.Write(append(b, '\n')); err != nil {
		t.Fatal(err)
	}
	var resp response
	if err := json.NewDecoder(c).Decode(&resp); err != nil {
		t.Fatal(err)
	}
	return resp
}

func mustOut(t testing.TB, sb *isolate.Sandbox, req request) string {
	t.Helper()
	r := call(t, sb, req)
	if r.Err != "" {
		t.Fatalf("%+v: %s", req, r.Err)
	}
	return r.Out
}

// hostState is what must come back to where it was after Close.
type hostState struct {
	mounts     int
	isolated   []string // processes of ours: argv0 "isolate-…"
	interfaces int
}

func snapshotHost(t testing.TB) hostState {
	t.Helper()
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	ifs, err := os.ReadDir("/sys/class/net")
	if err != nil {
		t.Fatal(err)
	}
	return hostState{
		mounts:     strings.Count(string(mi), "\n"),
		isolated:   isolateProcesses(),
		interfaces: len(ifs),
	}
}

// isolateProcesses lists this test process's sandbox processes (argv0
// "isolate-…" descending from it), not those of other tests running on the
// machine at the same time.
func isolateProcesses() []string {
	ents, _ := os.ReadDir("/proc")
	parent := map[string]string{}
	argv0 := map[string]string{}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cmd, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.HasPrefix(string(cmd), "isolate-") {
			continue
		}
		argv0[e.Name()] = strings.SplitN(string(cmd), "\x00", 2)[0]
		status, _ := os.ReadFile("/proc/" + e.Name() + "/status")
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "PPid:"); ok {
				parent[e.Name()] = strings.TrimSpace(v)
			}
		}
	}
	self := strconv.Itoa(os.Getpid())
	ours := func(pid string) bool {
		for range len(argv0) + 1 {
			p, ok := parent[pid]
			if !ok {
				return false
			}
			if p == self {
				return true
			}
			pid = p
		}
		return false
	}
	var out []string
	for pid, name := range argv0 {
		if ours(pid) {
			out = append(out, pid+":"+name)
		}
	}
	sort.Strings(out)
	return out
}

func requireRoot(t testing.TB) {
	t.Helper()
	// The rootless path (user namespace) is not what CI runs; as root the
	// tests must run, never skip.
	if os.Geteuid() != 0 {
		t.Skip("these tests exercise the root path; CI runs them as root")
	}
}
