package buildsteps

import (
	"context"
	"errors"
	"strings"
)

// copyStep runs [src, dest, user, mode]: it uploads the step's archive
// into the runner's scratch directory and has a root script unpack it and
// copy src to dest with Docker COPY's rules (see copyPlan).
func (r *runner) copyStep(ctx context.Context, name string, s Step) error {
	if r.archives == nil {
		return &StepError{Step: name, Message: "no uploaded files are available to this build"}
	}
	plan := copyPlan{
		archive: r.scratch + "/" + s.FilesHash + ".tar",
		scratch: r.scratch,
		src:     s.Args[0],
		dest:    r.resolve(s.Args[1]),
		into:    strings.HasSuffix(s.Args[1], "/"),
		owner:   r.user,
	}
	if len(s.Args) > 2 && s.Args[2] != "" {
		plan.owner = s.Args[2]
	}
	if len(s.Args) > 3 {
		plan.mode = s.Args[3]
	}

	rc, err := r.archives.Open(ctx, s.FilesHash)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &StepError{Step: name, Message: "the uploaded files of this step could not be opened", cause: err}
	}
	// From here on something may be in the scratch directory: cleanup
	// must look, even if the upload fails half-way.
	r.scratchUsed = true
	err = r.envd.upload(ctx, plan.archive, rootUser, rc)
	if cerr := rc.Close(); err == nil && cerr != nil {
		err = cerr
	}
	var ge *guestError
	switch {
	case err == nil:
	case ctx.Err() != nil, errors.As(err, &ge):
		return err
	case errors.Is(err, errArchiveRead):
		return &StepError{Step: name, Message: "the uploaded files could not be read", cause: err}
	default:
		return &StepError{Step: name, Message: "the files could not be sent to the sandbox", cause: err}
	}
	return r.check(ctx, name, "copying the files failed", rootCommand(plan.script()))
}
