package buildsteps

import (
	"context"
	"errors"
	"time"
)

const (
	// readyInterval is the pause between two runs of the ready command.
	readyInterval = time.Second
	// readyAttemptTimeout bounds one run of the ready command; one that
	// hangs counts as "not ready yet".
	readyAttemptTimeout = 30 * time.Second
	// startGrace is how long a start command without a ready command is
	// given to come up (or fail) before the build goes on.
	startGrace = 2 * time.Second
)

// finalize starts startCmd in the background and waits until readyCmd
// succeeds. On success the start command keeps running (it is what the
// template's sandboxes resume into); on failure it is killed.
func (r *runner) finalize(ctx context.Context, startCmd, readyCmd string) error {
	if startCmd == "" && readyCmd == "" {
		return nil
	}
	var bg *background
	if startCmd != "" {
		r.log.emit(StepFinalize, LevelInfo, capLine("[finalize] Starting: "+startCmd))
		var err error
		if bg, err = r.startBackground(ctx, startCmd); err != nil {
			return err
		}
	}
	var err error
	if readyCmd == "" {
		err = r.settle(ctx, bg)
	} else {
		r.log.emit(StepFinalize, LevelInfo, capLine("[finalize] Waiting until ready: "+readyCmd))
		err = r.waitReady(ctx, bg, readyCmd)
	}
	if bg != nil {
		if err != nil {
			bg.p.kill(ctx)
		}
		bg.detach()
	}
	if err == nil {
		r.log.emit(StepFinalize, LevelInfo, "[finalize] Ready")
	}
	return err
}

// settle gives a start command without a ready command startGrace to fail.
func (r *runner) settle(ctx context.Context, bg *background) error {
	timer := time.NewTimer(startGrace)
	defer timer.Stop()
	select {
	case <-bg.done:
		if ctx.Err() != nil {
			return ctx.Err() // the build's end broke the stream
		}
		return bg.failure()
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// waitReady runs readyCmd every readyInterval until it exits 0. A start
// command that fails meanwhile fails the build at once.
func (r *runner) waitReady(ctx context.Context, bg *background, readyCmd string) error {
	var bgDone <-chan struct{}
	if bg != nil {
		bgDone = bg.done
	}
	last := &tail{}
	for {
		if ctx.Err() != nil {
			return &StepError{Step: StepFinalize, Message: withOutput(describe(ctx.Err())+" before the ready command succeeded", last), cause: ctx.Err()}
		}
		ready, t, err := r.readyOnce(ctx, readyCmd)
		switch {
		case ctx.Err() != nil:
			continue
		case err != nil:
			return err
		case ready:
			return nil
		}
		last = t
		timer := time.NewTimer(readyInterval)
		select {
		case <-bgDone:
			if ctx.Err() == nil {
				if err := bg.failure(); err != nil {
					timer.Stop()
					return err
				}
			}
			bgDone = nil // it ended well (a daemon that forked): keep polling
		case <-timer.C:
		case <-ctx.Done():
		}
		timer.Stop()
	}
}

// readyOnce runs the ready command once. It runs every second, so its
// output is logged at debug only; its tail is kept for the failure
// message.
func (r *runner) readyOnce(ctx context.Context, readyCmd string) (bool, *tail, error) {
	actx, cancel := context.WithTimeout(ctx, readyAttemptTimeout)
	defer cancel()
	st, t, err := r.exec(actx, StepFinalize, r.userCommand(readyCmd, ""), pollOutput)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		return false, t, nil // this attempt took too long: not ready
	}
	return err == nil && st.ok(), t, err
}
