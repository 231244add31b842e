package buildsteps

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"maps"
	"path"
	"sync"
	"time"
)

// cleanupTimeout bounds removing the runner's files, which happens even
// after the build's context ended.
const cleanupTimeout = 30 * time.Second

// runner is one build's progress through its steps: the state earlier
// steps leave for later ones, as a Dockerfile's instructions do.
type runner struct {
	envd     *envd
	archives Archives
	log      Log

	user    string            // USER: who commands run as
	workdir string            // WORKDIR; "" is the user's home
	envs    map[string]string // every ENV so far

	// scratch is the runner's own directory in the sandbox (archives,
	// extraction); scratchUsed records that something may be in it.
	scratch     string
	scratchUsed bool
}

func newRunner(e *envd, archives Archives, log Log) *runner {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &runner{
		envd:     e,
		archives: archives,
		log:      lockedLog(log),
		user:     e.g.User,
		envs:     map[string]string{},
		scratch:  "/tmp/e2b-build-" + hex.EncodeToString(b),
	}
}

// lockedLog serializes calls to l: the start command's output is logged
// from its own goroutine while the ready command is polled.
func lockedLog(l Log) Log {
	if l == nil {
		return nil
	}
	var mu sync.Mutex
	return func(step, level, message string) {
		mu.Lock()
		defer mu.Unlock()
		l(step, level, message)
	}
}

// home is user's home directory, where envd starts commands that name no
// working directory.
func home(user string) string {
	if user == rootUser {
		return "/root"
	}
	return "/home/" + user
}

// resolve makes p absolute the way a Dockerfile does: relative to the
// current WORKDIR, or to the current user's home before any.
func (r *runner) resolve(p string) string {
	if path.IsAbs(p) {
		return path.Clean(p)
	}
	base := r.workdir
	if base == "" {
		base = home(r.user)
	}
	return path.Join(base, p)
}

// userCommand is script as a build's own command: a login shell (the
// template's profile), in the current WORKDIR, with the ENVs so far.
func (r *runner) userCommand(script, user string) command {
	if user == "" {
		user = r.user
	}
	return command{script: script, login: true, user: user, cwd: r.workdir, envs: maps.Clone(r.envs)}
}

// rootPrelude starts every script the runner runs for itself: stop at the
// first failure, and find the tools wherever the image's profile would
// have put them, since these scripts skip the profile.
const rootPrelude = "set -eu\nPATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\nexport PATH\numask 022\n"

// rootCommand is one of the runner's own scripts, run as root without the
// template's profile or ENVs, which must not change what it does.
func rootCommand(script string) command {
	return command{script: rootPrelude + script, user: rootUser}
}

// outputLevels are the levels a command's stdout and stderr lines are
// logged at; an empty level does not log them.
type outputLevels struct{ stdout, stderr string }

var (
	// stepOutput is a build command's output, which the user reads.
	stepOutput = outputLevels{stdout: LevelInfo, stderr: LevelWarn}
	// pollOutput is the ready command's, repeated every second.
	pollOutput = outputLevels{stdout: LevelDebug, stderr: LevelDebug}
	// noOutput is for checks whose failure the runner words itself.
	noOutput = outputLevels{}
)

// exec runs cmd for step, logs its output under step at levels and
// collects the tail of it.
func (r *runner) exec(ctx context.Context, step string, cmd command, levels outputLevels) (exitStatus, *tail, error) {
	t := &tail{}
	st, err := r.envd.run(ctx, cmd, func(stderr bool, line string) {
		t.add(line)
		level := levels.stdout
		if stderr {
			level = levels.stderr
		}
		if level != "" {
			r.log.emit(step, level, line)
		}
	})
	return st, t, err
}

// check runs cmd for step and fails with a *StepError when it does not
// exit 0: what (when set) says what failed, the status and the output's
// tail say how.
func (r *runner) check(ctx context.Context, step, what string, cmd command) error {
	st, t, err := r.exec(ctx, step, cmd, stepOutput)
	if err != nil {
		return err
	}
	if !st.ok() {
		msg := st.String()
		if what != "" {
			msg = what + ": " + msg
		}
		return &StepError{Step: step, Message: withOutput(msg, t)}
	}
	return nil
}

// withOutput appends the output's tail to a failure message.
func withOutput(msg string, t *tail) string {
	if s := t.String(); s != "" {
		return msg + "; last output:\n" + s
	}
	return msg
}

// cleanup removes the runner's scratch directory, even when ctx has ended.
// It returns a *StepError only if the directory may be left behind.
func (r *runner) cleanup(ctx context.Context) error {
	if !r.scratchUsed {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
	defer cancel()
	st, t, err := r.exec(ctx, StepFinalize, rootCommand("rm -rf -- "+shQuote(r.scratch)), noOutput)
	if err == nil && !st.ok() {
		err = fmt.Errorf("%s: %s", st, t)
	}
	if err != nil {
		return &StepError{Step: StepFinalize, Message: "the build's temporary files could not be removed", cause: err}
	}
	return nil
}
