package buildsteps

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
)

const (
	// bashPath runs every command, as the SDK's commands do (/bin/bash is
	// in every e2b base image and in the simulator's root filesystem).
	bashPath = "/bin/bash"
	// keepaliveSeconds asks envd for a keepalive event on a quiet stream,
	// so a long silent step (a big download) does not look idle to
	// whatever relays the connection.
	keepaliveSeconds = 30
	// killTimeout bounds the SIGKILL sent for a step that is given up on;
	// the build's own context may be what ended.
	killTimeout = 10 * time.Second
)

// command is one process the runner starts in the sandbox.
type command struct {
	script string // run by bash -c
	// login runs bash -l, which reads /etc/profile and so the template's
	// env file, as the SDK's commands in the finished sandbox will.
	login bool
	user  string
	cwd   string // "" is the user's home
	envs  map[string]string
}

// output receives a command's output line by line.
type output func(stderr bool, line string)

// exitStatus is how a command ended.
type exitStatus struct {
	code   int32
	exited bool   // false: a signal ended it
	status string // envd's wording, e.g. "signal: killed"
}

func (s exitStatus) ok() bool { return s.exited && s.code == 0 }

// String describes a failure for a step's message.
func (s exitStatus) String() string {
	if !s.exited && s.status != "" {
		return "command was stopped (" + s.status + ")"
	}
	return "command exited with code " + strconv.Itoa(int(s.code))
}

// process is a command started in the sandbox, whose event stream is open.
type process struct {
	e      *envd
	stream *connect.ServerStreamForClient[processpb.StartResponse]
	pid    uint32
}

// start launches cmd and waits for envd to report its pid. ctx bounds the
// stream, and with a deadline also the command: envd kills a process whose
// Start call's deadline (Connect-Timeout-Ms) passed.
func (e *envd) start(ctx context.Context, cmd command) (*process, error) {
	args := []string{"-c", cmd.script}
	if cmd.login {
		args = []string{"-l", "-c", cmd.script}
	}
	cfg := &processpb.ProcessConfig{Cmd: bashPath, Args: args, Envs: cmd.envs}
	if cmd.cwd != "" {
		cfg.Cwd = &cmd.cwd
	}
	noStdin := false // a command waiting on stdin gets EOF instead of hanging
	tag := processTag()
	req := connect.NewRequest(&processpb.StartRequest{Process: cfg, Tag: &tag, Stdin: &noStdin})
	e.authorize(req.Header(), cmd.user)
	req.Header().Set("Keepalive-Ping-Interval", strconv.Itoa(keepaliveSeconds))
	stream, err := e.process.Start(ctx, req)
	if err != nil {
		return nil, fmt.Errorf("starting a process: %w", err)
	}
	for stream.Receive() {
		if st := stream.Msg().GetEvent().GetStart(); st != nil {
			return &process{e: e, stream: stream, pid: st.GetPid()}, nil
		}
	}
	err = stream.Err()
	_ = stream.Close()
	if _, refused := refusal(err); !refused {
		// envd may have started it without our hearing the pid: the tag
		// still finds it.
		e.kill(ctx, &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Tag{Tag: tag}})
	}
	if err == nil {
		err = errors.New("the process stream ended before the process started")
	}
	return nil, fmt.Errorf("starting a process: %w", err)
}

// wait reads the process's output into out until it ends. An error means
// the stream broke (or its context ended) before the end was reported; the
// process may still be running.
func (p *process) wait(out output) (exitStatus, error) {
	defer p.stream.Close()
	stdout := &lineWriter{emit: func(l string) { out(false, l) }}
	stderr := &lineWriter{emit: func(l string) { out(true, l) }}
	defer stdout.Flush()
	defer stderr.Flush()
	for p.stream.Receive() {
		ev := p.stream.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			stdout.Write(d.GetStdout())
			stderr.Write(d.GetStderr())
		}
		if end := ev.GetEnd(); end != nil {
			return exitStatus{code: end.GetExitCode(), exited: end.GetExited(), status: end.GetStatus()}, nil
		}
	}
	err := p.stream.Err()
	if err == nil {
		err = errors.New("the process stream ended without the process's exit status")
	}
	return exitStatus{}, fmt.Errorf("process %d: %w", p.pid, err)
}

// kill sends SIGKILL to the process's group.
func (p *process) kill(ctx context.Context) {
	p.e.kill(ctx, &processpb.ProcessSelector{Selector: &processpb.ProcessSelector_Pid{Pid: p.pid}})
}

// kill sends SIGKILL to the process sel names, even after ctx ended (it
// is usually why). It is best effort: the process may have ended on its
// own (envd then knows it no more), and a sandbox that cannot be reached
// is released by the caller, which ends everything in it.
func (e *envd) kill(ctx context.Context, sel *processpb.ProcessSelector) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), killTimeout)
	defer cancel()
	req := connect.NewRequest(&processpb.SendSignalRequest{Process: sel, Signal: processpb.Signal_SIGNAL_SIGKILL})
	e.authorize(req.Header(), rootUser)
	_, _ = e.process.SendSignal(ctx, req)
}

// run runs cmd to its end. When ctx ends first, or the stream breaks, the
// process is killed, so that no step outlives the build.
func (e *envd) run(ctx context.Context, cmd command, out output) (exitStatus, error) {
	p, err := e.start(ctx, cmd)
	if err != nil {
		return exitStatus{}, err
	}
	st, err := p.wait(out)
	if err != nil {
		p.kill(ctx)
		if ctx.Err() != nil {
			return exitStatus{}, ctx.Err()
		}
		return exitStatus{}, err
	}
	return st, nil
}

// processTag names a process in envd's table, so that a process listing
// shows what the build started.
func processTag() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "e2b-build-" + hex.EncodeToString(b)
}
