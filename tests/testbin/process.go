package testbin

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Process is a server a test runs as a real child process, with its output
// in a log file. It dies with the test process (see ChildSysProcAttr).
type Process struct {
	name    string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// StartProcess runs binary with args and the test's environment plus env,
// sending stdout and stderr to logPath. name labels the process in errors
// and log tails.
//
// listeners (from Listen) are handed to the process as it starts, by
// systemd's socket-activation convention, which src/serve follows: file
// descriptors from 3 on, LISTEN_FDS and LISTEN_FDNAMES. A binary serving
// through src/serve takes the one bound to the address its flag names, so
// pass each listener's address in the flag. They are closed here in any
// case: once started, the process holds the only copy, and its end closes
// the port as a server's end would.
func StartProcess(name, binary, logPath string, args, env []string, listeners ...*net.TCPListener) (*Process, error) {
	defer func() {
		for _, ln := range listeners {
			_ = ln.Close()
		}
	}()
	inherit, names, err := listenerFiles(listeners)
	defer func() {
		for _, f := range inherit {
			_ = f.Close()
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	cmd := exec.Command(binary, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = append(withoutSocketActivation(os.Environ()), env...)
	if len(inherit) > 0 {
		cmd.ExtraFiles = inherit
		cmd.Env = append(cmd.Env, ListenFDsEnv+"="+strconv.Itoa(len(inherit)), ListenFDNamesEnv+"="+strings.Join(names, ":"))
	}
	cmd.SysProcAttr = ChildSysProcAttr()
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{name: name, logPath: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.exited }

// ExitErr is nil while the process runs, and says how it ended afterwards.
func (p *Process) ExitErr() error {
	select {
	case <-p.exited:
		return fmt.Errorf("%s exited: %v", p.name, p.waitErr)
	default:
		return nil
	}
}

// Kill sends SIGKILL and waits for the process to exit.
func (p *Process) Kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	<-p.exited
	return nil
}

// Stop sends SIGTERM, then SIGKILL after grace, and waits. It reports an
// error when the process had already exited: whatever ran against it was
// at some point talking to a dead server.
func (p *Process) Stop(grace time.Duration) error {
	if err := p.ExitErr(); err != nil {
		return fmt.Errorf("before stop: %w", err)
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
	return nil
}

// Pid is the process's id, for callers that read its usage from /proc.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// LogPath is the file holding the process's output.
func (p *Process) LogPath() string { return p.logPath }

// LogTail returns the last n lines of the process's log, labelled.
func (p *Process) LogTail(n int) string {
	data, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("--- %s log unreadable: %v\n", p.name, err)
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return fmt.Sprintf("--- last %d lines of %s (%s)\n%s\n", len(lines), p.name, p.logPath, strings.Join(lines, "\n"))
}
