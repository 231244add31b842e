package main

import (
	"bufio"
	"fmt"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as the processes the tests need, chosen by
// roleEnv: the pause program itself (with its handlers installed before it
// says "ready"), a process that leaves an orphan behind, and that orphan.
const roleEnv = "PAUSE_TEST_ROLE"

// prSetChildSubreaper is prctl's PR_SET_CHILD_SUBREAPER: orphans below the
// process are re-parented to it, as they are to PID 1 in a pod.
const prSetChildSubreaper = 36

func TestMain(m *testing.M) {
	switch os.Getenv(roleEnv) {
	case "":
		os.Exit(m.Run())
	case "pause":
		rolePause(false)
	case "pause-subreaper":
		rolePause(true)
	case "spawner":
		roleSpawner()
	case "orphan":
		// Lives until the test closes its stdin, then exits.
		_, _ = io.Copy(io.Discard, os.Stdin)
		os.Exit(0)
	default:
		fmt.Fprintf(os.Stderr, "unknown %s\n", roleEnv)
		os.Exit(3)
	}
}

// rolePause is main once its signals are wired: it prints "ready" when a
// stop signal can no longer kill it, then waits as main does.
func rolePause(subreaper bool) {
	if subreaper {
		if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, 1, 0); errno != 0 {
			fmt.Fprintf(os.Stderr, "prctl: %v\n", errno)
			os.Exit(3)
		}
	}
	signals := notifySignals()
	if subreaper {
		p, err := startRole("spawner", os.Stdin, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(3)
		}
		// Not waited for: reaping it is the program's job.
		fmt.Printf("spawner %d\n", p.Pid)
	}
	fmt.Println("ready")
	waitForStop(signals)
	os.Exit(0)
}

// roleSpawner starts an orphan-to-be and exits at once, so the orphan is
// re-parented to the subreaper above.
func roleSpawner() {
	p, err := startRole("orphan", os.Stdin, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	fmt.Printf("orphan %d\n", p.Pid)
	os.Exit(0)
}

func startRole(role string, stdin, stdout *os.File) (*os.Process, error) {
	return os.StartProcess(os.Args[0], []string{os.Args[0]}, &os.ProcAttr{
		Env:   roleEnvironment(role),
		Files: []*os.File{stdin, stdout, os.Stderr},
	})
}

// roleEnvironment is this process's environment with roleEnv replaced: a
// second roleEnv entry would not override the first.
func roleEnvironment(role string) []string {
	env := []string{roleEnv + "=" + role}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, roleEnv+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// pauseProcess is the pause program running as a child of the test.
type pauseProcess struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
}

func startPause(t *testing.T, role string) *pauseProcess {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = roleEnvironment(role)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &pauseProcess{cmd: cmd, stdin: stdin, lines: make(chan string, 16)}
	t.Cleanup(func() {
		_ = stdin.Close()
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			p.lines <- s.Text()
		}
		close(p.lines)
	}()
	return p
}

// expect reads lines until every key in want ("ready", "spawner", ...) has
// been seen, and returns the value after each key.
func (p *pauseProcess) expect(t *testing.T, want ...string) map[string]string {
	t.Helper()
	got := map[string]string{}
	deadline := time.After(30 * time.Second)
	for len(got) < len(want) {
		select {
		case l, ok := <-p.lines:
			if !ok {
				t.Fatalf("pause closed its output having said only %v", got)
			}
			key, value, _ := strings.Cut(l, " ")
			got[key] = value
		case <-deadline:
			t.Fatalf("pause said only %v, want %v", got, want)
		}
	}
	return got
}

// stop signals the process and checks that it exits with status 0.
func (p *pauseProcess) stop(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- p.cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("after %v pause exited with %v, want status 0", sig, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("pause still runs 30s after %v", sig)
	}
}

func TestStopSignalsExitZero(t *testing.T) {
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			p := startPause(t, "pause")
			p.expect(t, "ready")
			// Ready, it waits for a signal: not gone, nor a zombie yet to
			// be waited for. (Whether it would exit on its own later no
			// wait of a test can show; stop checks it exits on the signal.)
			if state, _, ok := procState(p.cmd.Process.Pid); !ok || state == 'Z' {
				t.Fatalf("pause is gone before any signal (state %c)", state)
			}
			p.stop(t, sig)
		})
	}
}

// TestReapsAdoptedOrphans runs pause as a child subreaper, which orphans are
// re-parented to just as they are to PID 1 in a pod's shared PID namespace:
// both its own exited child and an adopted orphan must be reaped rather than
// left as zombies.
func TestReapsAdoptedOrphans(t *testing.T) {
	p := startPause(t, "pause-subreaper")
	got := p.expect(t, "ready", "spawner", "orphan")
	pausePID := p.cmd.Process.Pid
	spawner, orphan := mustPID(t, got["spawner"]), mustPID(t, got["orphan"])

	// The spawner exited at once: pause, its parent, reaps it.
	waitGone(t, spawner)
	// The orphan now belongs to pause.
	if ppid := parentOf(t, orphan); ppid != pausePID {
		t.Fatalf("orphan %d has parent %d, want pause (%d)", orphan, ppid, pausePID)
	}
	// Let it exit; pause reaps it too.
	if err := p.stdin.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, orphan)
	p.stop(t, syscall.SIGTERM)
}

func TestReapChildrenWithNoChildren(t *testing.T) {
	if n := reapChildren(); n != 0 {
		t.Fatalf("reaped %d children of a process with none", n)
	}
}

func mustPID(t *testing.T, s string) int {
	t.Helper()
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		t.Fatalf("bad pid %q", s)
	}
	return pid
}

// procState returns the process's state letter (Z for a zombie) and its
// parent, or ok false once the process is gone (reaped).
func procState(pid int) (state byte, ppid int, ok bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, false
	}
	// pid (comm) state ppid ...; comm may hold spaces and parentheses.
	s := string(b)
	rest := s[strings.LastIndexByte(s, ')')+1:]
	fields := strings.Fields(rest)
	if len(fields) < 2 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(fields[1])
	return fields[0][0], ppid, true
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	_, ppid, ok := procState(pid)
	if !ok {
		t.Fatalf("process %d is gone", pid)
	}
	return ppid
}

func waitGone(t *testing.T, pid int) {
	t.Helper()
	poll.UntilNil(t, fmt.Sprintf("process %d to be reaped", pid), func() error {
		if state, _, ok := procState(pid); ok {
			return fmt.Errorf("still there, state %c", state)
		}
		return nil
	})
}
