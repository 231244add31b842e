package envd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/creack/pty"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
)

const (
	// outputChunkSize caps one data event.
	outputChunkSize = 32 << 10
	// subscriberBuffer is how many events a stream may lag behind before
	// the process's output blocks on it, as a real pipe would.
	subscriberBuffer = 64
	// drainGrace is how long output is still collected after the process
	// itself exited. A background child that inherited stdout can keep the
	// pipe open forever; envd does not wait for it, and neither do we past
	// this grace. Output the process wrote before exiting is already in the
	// pipe and is read well within it.
	drainGrace = 2 * time.Second
)

// process is one command the guest supervises: a host process in its own
// process group (or session, for a pty), whose output is fanned out to
// every Start/Connect stream subscribed to it.
type process struct {
	pid    uint32
	tag    *string
	config *processpb.ProcessConfig
	cmd    *exec.Cmd
	tty    *os.File // pty master; nil for pipe-backed processes

	stdinMu sync.Mutex
	stdin   io.WriteCloser // nil when disabled or closed

	mu   sync.Mutex
	subs map[*subscription]struct{}
	end  *processpb.ProcessEvent // set when the process has ended

	done chan struct{} // closed after the end event went out
}

// subscription is one stream's view of a process: data events, then the
// end event, then a closed channel.
type subscription struct {
	events   chan *processpb.ProcessEvent
	stop     chan struct{}
	stopOnce sync.Once
}

// cancel detaches the stream: the process never blocks on it again.
func (s *subscription) cancel() {
	s.stopOnce.Do(func() { close(s.stop) })
}

// spawnRequest is everything startProcess needs, already validated.
type spawnRequest struct {
	config  *processpb.ProcessConfig
	tag     *string
	pty     *processpb.PTY
	stdin   bool
	dir     string
	env     []string
	cred    *syscall.Credential // nil: the guest's own ids
	timeout time.Duration       // 0: no limit
}

// startProcess launches req and returns it with a subscription taken before
// any output could be produced, so the first stream sees all of it.
// onEnd runs once the process has ended and its end event went out.
func startProcess(req spawnRequest, onEnd func(*process)) (*process, *subscription, error) {
	cmd := exec.Command(req.config.GetCmd(), req.config.GetArgs()...)
	cmd.Dir = req.dir
	cmd.Env = req.env
	// pty adds its session flags to these attributes; the pipe path below
	// adds its process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: req.cred}

	p := &process{
		tag:    req.tag,
		config: req.config,
		cmd:    cmd,
		subs:   map[*subscription]struct{}{},
		done:   make(chan struct{}),
	}
	sub := p.subscribe()

	var outputs []outputSource
	if req.pty != nil {
		// pty starts the command in a new session with the terminal as its
		// controlling tty; the session leader's pid is also its group id.
		size := &pty.Winsize{Cols: uint16(req.pty.GetSize().GetCols()), Rows: uint16(req.pty.GetSize().GetRows())}
		tty, err := pty.StartWithSize(cmd, size)
		if err != nil {
			return nil, nil, fmt.Errorf("starting %q with a pty: %w", req.config.GetCmd(), err)
		}
		p.tty = tty
		outputs = append(outputs, outputSource{file: tty, wrap: ptyData})
	} else {
		stdoutR, stdoutW, err := os.Pipe()
		if err != nil {
			return nil, nil, fmt.Errorf("creating stdout pipe: %w", err)
		}
		stderrR, stderrW, err := os.Pipe()
		if err != nil {
			closeAll(stdoutR, stdoutW)
			return nil, nil, fmt.Errorf("creating stderr pipe: %w", err)
		}
		// Handing the child *os.File ends means exec starts no copying
		// goroutines and Wait never touches our read ends: they drain to
		// EOF on their own schedule.
		cmd.Stdout, cmd.Stderr = stdoutW, stderrW
		if req.stdin {
			w, err := cmd.StdinPipe()
			if err != nil {
				closeAll(stdoutR, stdoutW, stderrR, stderrW)
				return nil, nil, fmt.Errorf("creating stdin pipe: %w", err)
			}
			p.stdin = w
		}
		cmd.SysProcAttr.Setpgid = true
		err = cmd.Start()
		closeAll(stdoutW, stderrW)
		if err != nil {
			closeAll(stdoutR, stderrR)
			return nil, nil, fmt.Errorf("starting %q: %w", req.config.GetCmd(), err)
		}
		outputs = append(outputs,
			outputSource{file: stdoutR, wrap: stdoutData},
			outputSource{file: stderrR, wrap: stderrData})
	}
	p.pid = uint32(cmd.Process.Pid)

	var readers sync.WaitGroup
	for _, src := range outputs {
		readers.Go(func() { p.pump(src) })
	}
	var timer *time.Timer
	if req.timeout > 0 {
		timer = time.AfterFunc(req.timeout, func() { _ = p.signal(syscall.SIGKILL) })
	}
	go func() {
		waitErr := cmd.Wait()
		if timer != nil {
			timer.Stop()
		}
		deadline := time.Now().Add(drainGrace)
		for _, src := range outputs {
			if err := src.file.SetReadDeadline(deadline); err != nil {
				// Not pollable: closing is the only way to unblock a reader.
				_ = src.file.Close()
			}
		}
		readers.Wait()
		for _, src := range outputs {
			_ = src.file.Close()
		}
		p.finish(endEvent(cmd.ProcessState, waitErr))
		onEnd(p)
	}()
	return p, sub, nil
}

// outputSource is one stream of output and how its chunks are labelled.
type outputSource struct {
	file *os.File
	wrap func([]byte) *processpb.ProcessEvent_DataEvent
}

func stdoutData(b []byte) *processpb.ProcessEvent_DataEvent {
	return &processpb.ProcessEvent_DataEvent{Output: &processpb.ProcessEvent_DataEvent_Stdout{Stdout: b}}
}

func stderrData(b []byte) *processpb.ProcessEvent_DataEvent {
	return &processpb.ProcessEvent_DataEvent{Output: &processpb.ProcessEvent_DataEvent_Stderr{Stderr: b}}
}

func ptyData(b []byte) *processpb.ProcessEvent_DataEvent {
	return &processpb.ProcessEvent_DataEvent{Output: &processpb.ProcessEvent_DataEvent_Pty{Pty: b}}
}

// pump reads one output until EOF (or the post-exit deadline) and
// publishes it chunk by chunk.
func (p *process) pump(src outputSource) {
	for {
		buf := make([]byte, outputChunkSize)
		n, err := src.file.Read(buf)
		if n > 0 {
			p.publish(&processpb.ProcessEvent{Event: &processpb.ProcessEvent_Data{Data: src.wrap(buf[:n])}})
		}
		if err != nil {
			// EOF, EIO from a pty whose last slave closed, the drain
			// deadline, or a close: all mean this output is over.
			return
		}
	}
}

// endEvent describes how the process ended, in envd's terms: the exit code
// (-1 when a signal ended it), whether it exited by itself, the wait
// status, and the wait error text for anything but a clean exit.
func endEvent(state *os.ProcessState, waitErr error) *processpb.ProcessEvent {
	end := &processpb.ProcessEvent_EndEvent{ExitCode: -1}
	if state != nil {
		end.ExitCode = int32(state.ExitCode())
		end.Exited = state.Exited()
		end.Status = state.String()
	}
	if waitErr != nil {
		msg := waitErr.Error()
		end.Error = &msg
	}
	return &processpb.ProcessEvent{Event: &processpb.ProcessEvent_End{End: end}}
}

// subscribe attaches a new stream. After the process ended it receives just
// the end event.
func (p *process) subscribe() *subscription {
	s := &subscription{events: make(chan *processpb.ProcessEvent, subscriberBuffer), stop: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		s.events <- p.end
		close(s.events)
		return s
	}
	p.subs[s] = struct{}{}
	return s
}

// unsubscribe detaches s for good.
func (p *process) unsubscribe(s *subscription) {
	s.cancel()
	p.mu.Lock()
	delete(p.subs, s)
	p.mu.Unlock()
}

// publish hands ev to every subscriber, waiting for slow ones (the output
// back-pressures like a pipe) but never for one that has gone away.
func (p *process) publish(ev *processpb.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*subscription, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.events <- ev:
		case <-s.stop:
		}
	}
}

// finish delivers the end event and closes every subscription. It runs
// after all output was published, so nothing is sent after it.
func (p *process) finish(end *processpb.ProcessEvent) {
	p.mu.Lock()
	p.end = end
	subs := p.subs
	p.subs = nil
	p.mu.Unlock()
	for s := range subs {
		select {
		case s.events <- end:
		case <-s.stop:
		}
		close(s.events)
	}
	close(p.done)
}

// detachAll cancels every subscription so that no stream can hold the
// process's output up; used when the guest shuts down.
func (p *process) detachAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for s := range p.subs {
		s.cancel()
	}
}

// signal delivers sig to the process's whole group, so children started by
// the shell go too.
func (p *process) signal(sig syscall.Signal) error {
	select {
	case <-p.done:
		return nil
	default:
	}
	err := syscall.Kill(-int(p.pid), sig)
	if errors.Is(err, syscall.ESRCH) {
		// The group is gone already (or the leader moved away); make sure
		// the leader itself gets it.
		err = p.cmd.Process.Signal(sig)
		if errors.Is(err, os.ErrProcessDone) {
			return nil
		}
	}
	if err != nil {
		return fmt.Errorf("signalling process %d: %w", p.pid, err)
	}
	return nil
}

var (
	errNoStdin     = errors.New("stdin is not enabled for this process or was closed")
	errHasTTY      = errors.New("process has a pty: send input as pty data")
	errHasNoTTY    = errors.New("process has no pty")
	errProcessDone = errors.New("process has ended")
)

func (p *process) writeStdin(data []byte) error {
	if p.tty != nil {
		return errHasTTY
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return errNoStdin
	}
	if _, err := p.stdin.Write(data); err != nil {
		return fmt.Errorf("writing to stdin of process %d: %w", p.pid, err)
	}
	return nil
}

func (p *process) closeStdin() error {
	if p.tty != nil {
		return errHasTTY
	}
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin == nil {
		return nil
	}
	err := p.stdin.Close()
	p.stdin = nil
	return err
}

func (p *process) writePTY(data []byte) error {
	if p.tty == nil {
		return errHasNoTTY
	}
	select {
	case <-p.done:
		return errProcessDone
	default:
	}
	if _, err := p.tty.Write(data); err != nil {
		return fmt.Errorf("writing to pty of process %d: %w", p.pid, err)
	}
	return nil
}

func (p *process) resize(size *processpb.PTY_Size) error {
	if p.tty == nil {
		return errHasNoTTY
	}
	select {
	case <-p.done:
		return errProcessDone
	default:
	}
	return pty.Setsize(p.tty, &pty.Winsize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())})
}

func (p *process) info() *processpb.ProcessInfo {
	return &processpb.ProcessInfo{Config: p.config, Pid: p.pid, Tag: p.tag}
}

func closeAll(files ...*os.File) {
	for _, f := range files {
		_ = f.Close()
	}
}
