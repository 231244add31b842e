// Package codeinterp is the code-interpreter guest of the simulator's
// `e2b-ci` template: e2b's code-interpreter server (the protocol the npm
// @e2b/code-interpreter package speaks on guest port 49999) backed by real
// IPython kernels, as sandboxd's e2b-ci image serves it on real nodes.
//
// The server itself is Python (server.py, embedded here): it drives the
// kernels with jupyter_client, which the code-interpreter layer of the root
// filesystem provides (tools/build/rootfs-ci.sh, src/simulator/rootfs). This
// package starts it inside an isolated sandbox, as the sandbox's user, and
// hands it the sandbox's access token once the claim brings one. It is
// started when the warm sandbox boots, with its default context's kernel,
// so a claim finds the kernel already running.
package codeinterp

import (
	"bufio"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Port is the guest port e2b's code-interpreter server listens on.
const Port = 49999

// Template is the image name of the code-interpreter template: a pool's
// template is the code interpreter when its name is this or starts with
// it and a tag ("e2b-ci:latest"), as sandboxd's e2b-ci image is named.
const Template = "e2b-ci"

// IsTemplate reports whether a pool template names the code-interpreter
// image.
func IsTemplate(template string) bool {
	return template == Template || strings.HasPrefix(template, Template+":")
}

//go:embed server.py
var serverSource []byte

// bootstrap is the program python runs: it reads server.py from fd 3, so the
// server ships with the binary that starts it (no copy in the sandbox's
// disk, none to keep in step with the layer) and ps shows a short command.
const bootstrap = `import sys; f = open(3, closefd=True); src = f.read(); f.close(); ` +
	`sys.argv = ["codeinterp"]; exec(compile(src, "codeinterp/server.py", "exec"), {"__name__": "__main__"})`

// Python is the interpreter the server runs on, found on the sandbox
// user's PATH.
const Python = "python3"

// startTimeout bounds how long the server takes to listen, which it does
// once its default kernel is up (the kernel may take a minute).
const startTimeout = 90 * time.Second

// Server is a running code-interpreter server.
type Server struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser

	mu     sync.Mutex
	closed bool

	exited chan struct{}
	err    error // the process's end, once exited is closed
}

// Start starts the server from cmd, a command (name "python3") built the way
// the caller runs programs as the sandbox's user (isolate.Command), with
// env added to its environment. It returns once the server listens on
// 127.0.0.1:Port; its default context's kernel is still starting then,
// and the first cell waits for it. stderr receives the server's and the
// kernels' diagnostics (nil discards them).
func Start(cmd *exec.Cmd, env map[string]string, stderr io.Writer) (_ *Server, err error) {
	cmd.Args = []string{cmd.Args[0], "-I", "-c", bootstrap}
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.Stderr = stderr
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	// Its own process group, so Close can end it and anything it forked
	// short of the kernels, which jupyter_client puts in sessions of
	// their own (the sandbox's end takes those).
	cmd.SysProcAttr.Setpgid = true

	src, srcW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("codeinterp: %w", err)
	}
	defer src.Close()
	cmd.ExtraFiles = []*os.File{src} // fd 3
	stdin, err := cmd.StdinPipe()
	if err != nil {
		srcW.Close()
		return nil, fmt.Errorf("codeinterp: %w", err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		srcW.Close()
		return nil, fmt.Errorf("codeinterp: %w", err)
	}
	if err := cmd.Start(); err != nil {
		srcW.Close()
		return nil, fmt.Errorf("codeinterp: start %s: %w", cmd.Path, err)
	}
	s := &Server{cmd: cmd, stdin: stdin, exited: make(chan struct{})}
	// The script is larger than a pipe's buffer can be; it is written
	// while python reads it.
	go func() {
		_, _ = srcW.Write(serverSource)
		srcW.Close()
	}()
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		signalled := false
		for sc.Scan() {
			if !signalled && sc.Text() == "listening" {
				close(ready)
				signalled = true
			}
		}
		// Drained to the end so the server never blocks writing.
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		s.err = cmd.Wait()
		close(s.exited)
	}()
	defer func() {
		if err != nil {
			_ = s.Close()
		}
	}()
	t := time.NewTimer(startTimeout)
	defer t.Stop()
	select {
	case <-ready:
		return s, nil
	case <-s.exited:
		return nil, fmt.Errorf("codeinterp: the server ended before listening (%v); is the code-interpreter layer (%s) under the root filesystem?", s.err, "tools/build/rootfs-ci.sh")
	case <-t.C:
		return nil, fmt.Errorf("codeinterp: the server did not listen within %s", startTimeout)
	}
}

// SetToken makes the server require token in X-Access-Token on every
// request but GET /health, as envd does; "" turns the check off. Until the
// first call the server answers 503: the sandbox is not claimed yet.
func (s *Server) SetToken(token string) error {
	if strings.ContainsAny(token, "\r\n") {
		return errors.New("codeinterp: an access token cannot span lines")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("codeinterp: server closed")
	}
	if _, err := io.WriteString(s.stdin, token+"\n"); err != nil {
		return fmt.Errorf("codeinterp: hand the token over: %w", err)
	}
	return nil
}

// closeGrace is how long the server gets to stop its kernels once its
// stdin ends.
const closeGrace = 5 * time.Second

// Close ends the server: its stdin's end asks it to stop its kernels and
// exit; after closeGrace its process group is killed.
func (s *Server) Close() error {
	s.mu.Lock()
	already := s.closed
	s.closed = true
	s.mu.Unlock()
	if !already {
		_ = s.stdin.Close()
	}
	t := time.NewTimer(closeGrace)
	defer t.Stop()
	select {
	case <-s.exited:
	case <-t.C:
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.exited
	}
	return nil
}

// Done is closed when the server has exited.
func (s *Server) Done() <-chan struct{} { return s.exited }
