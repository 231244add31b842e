package buildsteps

import (
	"context"
	"io"
)

// Step names outside the template's own steps, as the SDK knows them.
const (
	StepBase     = "base"
	StepFinalize = "finalize"
)

// Archives opens an uploaded archive by its filesHash.
type Archives interface {
	Open(ctx context.Context, filesHash string) (io.ReadCloser, error)
}

// Run runs t's steps, then its start and ready commands, in the sandbox
// whose envd g reaches. A failing step returns a *StepError naming the
// step, with its exit code and the tail of its output; nothing is retried
// and later steps do not run. When ctx ends the running command is killed
// and the *StepError unwraps to ctx's error. Whatever the runner put in the
// sandbox besides the build's results is removed before Run returns; the
// start command, when there is one and the build succeeded, keeps running.
// archives may be nil for a template without COPY steps; log may be nil.
func Run(ctx context.Context, g Guest, t Template, archives Archives, log Log) (err error) {
	if err := t.Validate(); err != nil {
		return &StepError{Step: StepBase, Message: "invalid build definition: " + err.Error(), cause: err}
	}
	e, err := newEnvd(g)
	if err != nil {
		return &StepError{Step: StepBase, Message: err.Error(), cause: err}
	}
	r := newRunner(e, archives, log)
	defer func() {
		if cerr := r.cleanup(ctx); cerr != nil && err == nil {
			err = cerr
		}
	}()
	for i, s := range t.Steps {
		name := stepName(i)
		if err := ctx.Err(); err != nil {
			return stepError(name, err)
		}
		r.log.emit(name, LevelInfo, announce(name, s))
		if err := r.step(ctx, name, s); err != nil {
			return stepError(name, err)
		}
	}
	return stepError(StepFinalize, r.finalize(ctx, t.StartCmd, t.ReadyCmd))
}
