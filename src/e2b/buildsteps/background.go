package buildsteps

import (
	"context"
)

// background is the start command while the build waits for it: its
// output goes to the log under "finalize" until the build detaches.
type background struct {
	p      *process
	cancel context.CancelFunc // ends the event stream, not the process
	stop   func() bool        // unhooks the stream from the build's ctx
	done   chan struct{}      // closed when the stream ended
	st     exitStatus         // how it ended, once done
	err    error              // the stream broke, once done
	tail   *tail
}

// startBackground starts cmd as a build command. Its stream has no
// deadline, since envd would kill the process at it, but ends with the
// build's ctx until detach.
func (r *runner) startBackground(ctx context.Context, cmd string) (*background, error) {
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, cancel)
	p, err := r.envd.start(sctx, r.userCommand(cmd, ""))
	if err != nil {
		stop()
		cancel()
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, err
	}
	bg := &background{p: p, cancel: cancel, stop: stop, done: make(chan struct{}), tail: &tail{}}
	go func() {
		defer close(bg.done)
		bg.st, bg.err = p.wait(func(stderr bool, line string) {
			bg.tail.add(line)
			level := LevelInfo
			if stderr {
				level = LevelWarn
			}
			r.log.emit(StepFinalize, level, line)
		})
	}()
	return bg, nil
}

// failure is what the start command's end means once done: nil when it
// exited 0 (it may have left a daemon behind).
func (bg *background) failure() error {
	switch {
	case bg.err != nil:
		return bg.err
	case !bg.st.ok():
		return &StepError{Step: StepFinalize, Message: withOutput("the start command ended: "+bg.st.String(), bg.tail)}
	}
	return nil
}

// detach stops following the process and leaves it running: envd keeps a
// process whose stream went away.
func (bg *background) detach() {
	bg.stop()
	bg.cancel()
	<-bg.done
}
