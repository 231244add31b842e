package buildsteps

import (
	"testing"
	"time"
)

// oddName is a file name that breaks any careless shell use: spaces,
// both quotes, a $ expansion, a glob character and a newline.
const oddName = "odd 'q' \"d\" $HOME *\nnl.txt"

// TestCopy copies directories, single files and globs out of a gzipped and
// a plain archive laid out as the SDK uploads them, and checks contents,
// owners, modes and that the runner's own files are gone.
func TestCopy(t *testing.T) {
	b := claimBox(t)
	archives := memArchives{}
	gz := archives.add(makeTar(t, true, [][2]string{
		{"files/", ""},
		{"files/a.txt", "alpha"},
		{"files/sub/", ""},
		{"files/sub/b.txt", "beta"},
		{"files/with space.txt", "spaced"},
		{"files/" + oddName, "odd"},
		{"files/.hidden", "hidden"},
	}))
	plain := archives.add(makeTar(t, false, [][2]string{
		{"single.txt", "one"},
		{"-dash.txt", "dash"},
		{"docs/", ""},
		{"docs/x.md", "x"},
		{"docs/y.md", "y"},
		{"docs/z.txt", "z"},
	}))
	tpl := Template{FromTemplate: "base", Steps: []Step{
		{Type: TypeCopy, Args: []string{"files", "/home/user/my files", "", ""}, FilesHash: gz},
		{Type: TypeCopy, Args: []string{"single.txt", "/opt/dest/", "root", "0755"}, FilesHash: plain},
		{Type: TypeCopy, Args: []string{"docs/*.md", "/srv/docs", "user", "0600"}, FilesHash: plain},
		{Type: TypeCopy, Args: []string{"single.txt", "/opt/renamed.txt", "", ""}, FilesHash: plain},
		{Type: TypeCopy, Args: []string{"-dash.txt", "rel/", "", ""}, FilesHash: plain},
		{Type: TypeCopy, Args: []string{"do*", "/srv/globdir", "", ""}, FilesHash: plain},
		{Type: TypeCopy, Args: []string{"files", "/srv", "user", ""}, FilesHash: gz},
		{Type: TypeWorkdir, Args: []string{"/work"}},
		{Type: TypeCopy, Args: []string{"docs", ".", "", ""}, FilesHash: plain},
	}}
	var logs logRecorder
	if err := Run(testCtx(t, 2*time.Minute), b.guest, tpl, archives, logs.log); err != nil {
		t.Fatalf("Run: %v\n%s", err, logs.String())
	}

	dir := shQuote("/home/user/my files")
	for _, c := range []struct{ script, want string }{
		// A directory source: its contents, dotfiles too, land in dest.
		{"cd " + dir + " && cat a.txt sub/b.txt 'with space.txt' .hidden " + shQuote(oddName), "alphabetaspacedhiddenodd"},
		{"cd " + dir + " && stat -c %U . sub a.txt " + shQuote(oddName), "user\nuser\nuser\nuser"},
		{"test ! -e " + dir + "/files && echo flat", "flat"},
		// A file into a directory, with an owner and a mode.
		{"cat /opt/dest/single.txt; echo; stat -c '%U %a' /opt/dest/single.txt", "one\nroot 755"},
		// A glob: each match into dest, with the mode on files.
		{"cat /srv/docs/x.md /srv/docs/y.md; echo; ls /srv/docs | wc -l; stat -c '%U %a' /srv/docs/x.md", "xy\n2\nuser 600"},
		{"stat -c %U /srv/docs", "user"},
		// A file to a file path, keeping the archive's mode.
		{"cat /opt/renamed.txt; echo; stat -c '%U %a' /opt/renamed.txt", "one\nuser 644"},
		// A relative dest is under the user's home, a name may start with
		// a dash.
		{"cat /home/user/rel/-dash.txt", "dash"},
		// A glob matching a directory copies the directory itself.
		{"cat /srv/globdir/docs/x.md /srv/globdir/docs/z.txt", "xz"},
		// A directory that existed keeps its owner and mode; what was
		// copied into it is the step's user's.
		{"stat -c '%U %a' /srv /srv/a.txt", "root 755\nuser 644"},
		// "." after WORKDIR is the working directory.
		{"cat /work/x.md /work/z.txt", "xz"},
	} {
		if got := b.must(t, "root", c.script); got != c.want {
			t.Errorf("%s = %q, want %q", c.script, got, c.want)
		}
	}
	if !logs.has("2", LevelInfo, "[2] COPY --chown=root --chmod=0755 single.txt /opt/dest/") {
		t.Errorf("no announcement of step 2 in\n%s", logs.String())
	}
	b.noLeftovers(t)
}

// TestCopyFailures: a source matching nothing and a missing archive fail
// their step, and the runner still removes its files.
func TestCopyFailures(t *testing.T) {
	b := claimBox(t)
	archives := brokenArchives{memArchives{}}
	h := archives.add(makeTar(t, true, [][2]string{{"a.txt", "a"}}))
	missing := "0000000000000000000000000000000000000000000000000000000000000000"
	for _, c := range []struct {
		step Step
		want string
	}{
		{Step{Type: TypeCopy, Args: []string{"nothing*", "/x", "", ""}, FilesHash: h}, "nothing in the uploaded files matches nothing*"},
		{Step{Type: TypeCopy, Args: []string{"a.txt", "/x", "", ""}, FilesHash: missing}, "uploaded files of this step could not be opened"},
		{Step{Type: TypeCopy, Args: []string{"a.txt", "/x", "nosuchuser", ""}, FilesHash: h}, "copying the files failed"},
		// The store fails after 1 MiB: a partial upload was in the sandbox.
		{Step{Type: TypeCopy, Args: []string{"a.txt", "/x", "", ""}, FilesHash: brokenHash}, "the uploaded files could not be read"},
	} {
		tpl := Template{Steps: []Step{{Type: TypeRun, Args: []string{"true"}}, c.step}}
		err := Run(testCtx(t, time.Minute), b.guest, tpl, archives, nil)
		se := asStepError(t, err)
		if se.Step != "2" || !contains(se.Message, c.want) {
			t.Errorf("%v: got %q, want step 2 with %q", c.step.Args, err, c.want)
		}
		b.noLeftovers(t)
	}
	if got := b.must(t, "root", "test -e /x && echo exists || echo absent"); got != "absent" {
		t.Errorf("a failed COPY left /x behind: %s", got)
	}
}
