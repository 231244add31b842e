package buildsteps

import (
	"context"
	"fmt"
	"strings"
)

// envFile is where ENV steps persist: bash -l, which the SDK's commands
// run through, sources /etc/profile.d/*.sh, so sandboxes created from the
// template see the variables too.
const envFile = "/etc/profile.d/e2b-template-env.sh"

// step runs one validated step.
func (r *runner) step(ctx context.Context, name string, s Step) error {
	switch s.Type {
	case TypeRun:
		return r.runStep(ctx, name, s.Args)
	case TypeCopy:
		return r.copyStep(ctx, name, s)
	case TypeEnv:
		return r.envStep(ctx, name, s.Args)
	case TypeWorkdir:
		return r.workdirStep(ctx, name, s.Args[0])
	case TypeUser:
		return r.userStep(ctx, name, s.Args[0])
	}
	return fmt.Errorf("unknown step type %q", s.Type) // Validate let it through
}

// runStep runs [command] or [command, user].
func (r *runner) runStep(ctx context.Context, name string, args []string) error {
	user := ""
	if len(args) > 1 {
		user = args[1]
	}
	return r.check(ctx, name, "", r.userCommand(args[0], user))
}

// envStep sets [k1, v1, k2, v2, …] for later steps and appends them to the
// template's env file. Appending keeps what a base built here already
// exported; a later line wins when the file is sourced.
func (r *runner) envStep(ctx context.Context, name string, args []string) error {
	var lines []string
	for i := 0; i < len(args); i += 2 {
		lines = append(lines, shQuote("export "+args[i]+"="+shQuote(args[i+1])))
	}
	script := fmt.Sprintf("mkdir -p /etc/profile.d\nprintf '%%s\\n' %s >> %s\nchmod 0644 %s\n",
		strings.Join(lines, " "), shQuote(envFile), shQuote(envFile))
	if err := r.check(ctx, name, "writing "+envFile+" failed", rootCommand(script)); err != nil {
		return err
	}
	for i := 0; i < len(args); i += 2 {
		r.envs[args[i]] = args[i+1]
	}
	return nil
}

// workdirStep makes dir (relative to the current one) the working
// directory of later commands, creating it for the current user if it is
// missing, so that user can write there.
func (r *runner) workdirStep(ctx context.Context, name, dir string) error {
	abs := r.resolve(dir)
	script := "owner=" + shQuote(r.user) + "\n" + mkdirOwnedFunc + "mkdir_owned " + shQuote(abs) + "\n"
	if err := r.check(ctx, name, "creating "+abs+" failed", rootCommand(script)); err != nil {
		return err
	}
	r.workdir = abs
	return nil
}

// userStep makes user the one later commands run as. The user must exist:
// failing here names the step that is wrong, rather than the next RUN.
func (r *runner) userStep(ctx context.Context, name, user string) error {
	st, _, err := r.exec(ctx, name, rootCommand("id -u -- "+shQuote(user)+" >/dev/null 2>&1"), noOutput)
	if err != nil {
		return err
	}
	if !st.ok() {
		return &StepError{Step: name, Message: fmt.Sprintf("user %q does not exist in the sandbox", user)}
	}
	r.user = user
	return nil
}

// mkdirOwnedFunc defines mkdir_owned DIR for the runner's bash scripts: it
// creates the absolute, clean DIR and its missing parents and gives each
// directory it created, and only those, to $owner. Parents are cut off with
// parameter expansion, not dirname, whose output would lose a name's
// trailing newlines.
const mkdirOwnedFunc = `mkdir_owned() {
	if [ -d "$1" ]; then return 0; fi
	local parent=${1%/*}
	mkdir_owned "${parent:-/}"
	mkdir -- "$1"
	chown -h -- "$owner:" "$1"
}
`
