package buildsteps

import (
	"strings"
	"testing"
	"time"
)

// TestRunEnvWorkdirUser builds a template of RUN, ENV, WORKDIR and USER
// steps and checks each one's effect in the sandbox afterwards.
func TestRunEnvWorkdirUser(t *testing.T) {
	b := claimBox(t)
	tricky := `it's "$HOME" & a \ back` + "\nsecond line"
	tpl := Template{FromTemplate: "base", Steps: []Step{
		{Type: TypeRun, Args: []string{"echo hi > ~/run.txt"}},
		{Type: TypeEnv, Args: []string{"GREETING", tricky, "PLAIN", "yes"}},
		{Type: TypeRun, Args: []string{`printf '%s' "$GREETING" > ~/env.txt`}},
		{Type: TypeWorkdir, Args: []string{"/opt/app/sub"}},
		{Type: TypeRun, Args: []string{"pwd > /tmp/pwd.txt; touch mine"}},
		{Type: TypeWorkdir, Args: []string{"deeper"}},
		{Type: TypeRun, Args: []string{"pwd > /tmp/pwd2.txt"}},
		{Type: TypeUser, Args: []string{"root"}},
		{Type: TypeRun, Args: []string{"id -un > /tmp/who.txt"}},
		{Type: TypeRun, Args: []string{"id -un > /tmp/who2.txt", "user"}},
		{Type: TypeRun, Args: []string{"echo out-line; echo err-line >&2"}},
	}}
	var logs logRecorder
	if err := Run(testCtx(t, 2*time.Minute), b.guest, tpl, nil, logs.log); err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}

	for _, c := range []struct{ script, want string }{
		{"cat ~/run.txt; stat -c %U ~/run.txt", "hi\nuser"},
		{"cat ~/env.txt", tricky},
		{"cat /tmp/pwd.txt /tmp/pwd2.txt", "/opt/app/sub\n/opt/app/sub/deeper"},
		// WORKDIR made the directories for the user then current, so
		// a RUN as that user could write there.
		{"stat -c %U /opt/app /opt/app/sub /opt/app/sub/deeper /opt/app/sub/mine", "user\nuser\nuser\nuser"},
		{"stat -c %U /opt", "root"},
		{"cat /tmp/who.txt /tmp/who2.txt", "root\nuser"},
	} {
		if got := b.must(t, "user", c.script); got != c.want {
			t.Errorf("%s = %q, want %q", c.script, got, c.want)
		}
	}
	// The ENVs persist for a later login shell, as a sandbox created from
	// the template runs its commands.
	for _, user := range []string{"user", "root"} {
		if got := b.must(t, user, `printf '%s|%s' "$GREETING" "$PLAIN"`); got != tricky+"|yes" {
			t.Errorf("a later bash -l as %s sees %q, want %q", user, got, tricky+"|yes")
		}
	}
	if got := b.must(t, "root", "stat -c '%U %a' "+envFile); got != "root 644" {
		t.Errorf("%s is %q, want root 644", envFile, got)
	}

	for _, want := range []logLine{
		{"1", LevelInfo, "[1] RUN echo hi > ~/run.txt"},
		{"2", LevelInfo, "[2] ENV GREETING PLAIN"},
		{"4", LevelInfo, "[4] WORKDIR /opt/app/sub"},
		{"8", LevelInfo, "[8] USER root"},
		{"10", LevelInfo, "[10] RUN id -un > /tmp/who2.txt (as user)"},
		{"11", LevelInfo, "out-line"},
		{"11", LevelWarn, "err-line"},
	} {
		if !logs.has(want.step, want.level, want.message) {
			t.Errorf("no log line %+v in\n%s", want, logs.String())
		}
	}
	if strings.Contains(logs.String(), "second line") {
		t.Errorf("an ENV value reached the log:\n%s", logs.String())
	}
	b.noLeftovers(t)
}
