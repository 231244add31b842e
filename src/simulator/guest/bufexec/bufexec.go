// Package bufexec runs one command to completion with its output buffered,
// as sandboxd's buffered exec (POST /v1/sandboxes/{id}/exec) does: no
// stdin, stdout and stderr capped together, an optional timeout, and the
// command's whole process group killed when the run is given up. The
// simulator node uses it for unisolated sandboxes and the isolated guest
// program (package machine) inside its sandbox, so both answer alike.
package bufexec

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Why a run was given up; each maps to the status sandboxd answers.
var (
	// ErrBadRequest: the command is missing or not executable, or the
	// working directory does not exist. The caller's fault, not a 502.
	ErrBadRequest = errors.New("bufexec: bad request")
	// ErrTooLarge: stdout and stderr together passed the cap.
	ErrTooLarge = errors.New("bufexec: output over the cap")
	// ErrTimeout: the command outlived its timeout.
	ErrTimeout = errors.New("bufexec: timed out")
)

// killGrace is how long Wait waits for the pipes after the kill: a
// grandchild that escaped the process group must not hold the answer.
const killGrace = 2 * time.Second

// Status is the HTTP status sandboxd answers for a Run error.
func Status(err error) int {
	switch {
	case errors.Is(err, ErrBadRequest):
		return http.StatusBadRequest
	case errors.Is(err, ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, ErrTimeout):
		return http.StatusGatewayTimeout
	}
	return http.StatusBadGateway
}

// Check refuses a request the contract answers 400 before anything runs:
// an empty argv, a negative timeout, an env name no environment can hold.
func Check(req sandboxd.ExecRequest) error {
	if len(req.Argv) == 0 || req.Argv[0] == "" {
		return fmt.Errorf("%w: argv is empty", ErrBadRequest)
	}
	if req.TimeoutSeconds < 0 {
		return fmt.Errorf("%w: negative timeout_seconds", ErrBadRequest)
	}
	for k, v := range req.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.ContainsRune(v, 0) {
			return fmt.Errorf("%w: env name %.64q cannot be set", ErrBadRequest, k)
		}
	}
	return nil
}

// Command builds the command for req on top of base, which carries the
// user's identity, environment and default directory: argv[0] is looked
// up in base's own PATH (not this process's), cwd must be an existing
// directory (resolved by dir, which maps the guest's path to where it
// lives), and env is added over base's, then req.Env over that, sorted so
// a run is reproducible.
func Command(ctx context.Context, base func(ctx context.Context, name string, args ...string) *exec.Cmd, req sandboxd.ExecRequest, dir func(string) string, env map[string]string) (*exec.Cmd, error) {
	if err := Check(req); err != nil {
		return nil, err
	}
	cmd := base(ctx, req.Argv[0], req.Argv[1:]...)
	if req.Cwd != "" {
		d := dir(req.Cwd)
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%w: cwd %.256q is not a directory", ErrBadRequest, req.Cwd)
		}
		cmd.Dir = d
	}
	vars := map[string]string{}
	for _, kv := range cmd.Env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	for k, v := range env {
		vars[k] = v
	}
	for k, v := range req.Env {
		vars[k] = v
	}
	cmd.Env = cmd.Env[:0]
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		cmd.Env = append(cmd.Env, k+"="+vars[k])
	}
	name := req.Argv[0]
	if !strings.Contains(name, "/") {
		path, err := lookPath(name, vars["PATH"], cmd.Dir)
		if err != nil {
			return nil, fmt.Errorf("%w: %.256q: executable not found", ErrBadRequest, name)
		}
		cmd.Path, cmd.Err = path, nil
	} else if !filepath.IsAbs(name) && cmd.Dir != "" {
		cmd.Path = filepath.Join(cmd.Dir, name)
	}
	return cmd, nil
}

// lookPath finds name in the directories of path, as a shell would.
func lookPath(name, path, cwd string) (string, error) {
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		if !filepath.IsAbs(d) && cwd != "" {
			d = filepath.Join(cwd, d)
		}
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fs.ErrNotExist
}

// Run runs cmd to completion with no stdin and stdout and stderr buffered
// up to limit bytes together, for at most timeout (0: until ctx ends).
// Giving up (timeout, ctx, the cap) kills the command's process group
// before Run returns. Output that is not valid UTF-8 gets U+FFFD.
func Run(ctx context.Context, cmd *exec.Cmd, timeout time.Duration, limit int) (sandboxd.ExecResult, error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if timeout > 0 {
		var stop context.CancelFunc
		runCtx, stop = context.WithTimeoutCause(runCtx, timeout, ErrTimeout)
		defer stop()
	}
	out := &capped{limit: limit, over: func() { cancel(ErrTooLarge) }}
	stdout, stderr := &stream{c: out}, &stream{c: out}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = nil, stdout, stderr
	cmd.WaitDelay = killGrace
	ownGroup(cmd)
	if err := cmd.Start(); err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) || errors.Is(err, exec.ErrNotFound) {
			return sandboxd.ExecResult{}, fmt.Errorf("%w: start %.256q: %v", ErrBadRequest, cmd.Args[0], err)
		}
		return sandboxd.ExecResult{}, fmt.Errorf("bufexec: start %.256q: %w", cmd.Args[0], err)
	}
	// The kill reaches the whole group, so a shell's children die with it.
	stop := context.AfterFunc(runCtx, func() { killGroup(cmd.Process) })
	waitErr := cmd.Wait()
	stop()
	if cause := context.Cause(runCtx); cause != nil {
		switch {
		case errors.Is(cause, ErrTooLarge):
			return sandboxd.ExecResult{}, fmt.Errorf("%w: more than %d bytes of output", ErrTooLarge, limit)
		case errors.Is(cause, ErrTimeout):
			return sandboxd.ExecResult{}, fmt.Errorf("%w after %s", ErrTimeout, timeout)
		default:
			return sandboxd.ExecResult{}, fmt.Errorf("bufexec: run given up: %w", cause)
		}
	}
	var exitErr *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &exitErr) {
		return sandboxd.ExecResult{}, fmt.Errorf("bufexec: wait: %w", waitErr)
	}
	return sandboxd.ExecResult{
		ExitCode: exitCode(cmd),
		Stdout:   strings.ToValidUTF8(stdout.String(), "\uFFFD"),
		Stderr:   strings.ToValidUTF8(stderr.String(), "\uFFFD"),
	}, nil
}

// capped is the output budget stdout and stderr share.
type capped struct {
	mu    sync.Mutex
	n     int
	limit int
	done  bool
	over  func()
}

// take reserves n bytes and reports whether they fit.
func (c *capped) take(n int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return false
	}
	if c.n+n > c.limit {
		c.done = true
		c.over()
		return false
	}
	c.n += n
	return true
}

type stream struct {
	c   *capped
	mu  sync.Mutex
	buf strings.Builder
}

func (s *stream) Write(p []byte) (int, error) {
	if !s.c.take(len(p)) {
		// Swallow the rest: the command is being killed, and an error
		// here would only end the copy early.
		return len(p), nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.Write(p)
}

func (s *stream) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.buf.String()
}
