package buildsteps

import (
	"os/exec"
	"testing"
)

// trickyWords are strings a shell would mangle unless quoted right.
var trickyWords = []string{
	"",
	"plain",
	"with space",
	"it's",
	"'",
	"''",
	`"double"`,
	"$HOME",
	"${PATH}$(id)`id`",
	"back\\slash\\",
	"new\nline\n",
	"tab\tand*glob?[x]",
	"-n",
	"semi;colon&&amp|pipe>redir<",
	"~user",
	"!history",
	"\x01\x7f\u00e9",
}

// TestShQuote hands each quoted word to a real shell, which must give the
// word back byte for byte.
func TestShQuote(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh on this host")
	}
	for _, w := range trickyWords {
		out, err := exec.Command(sh, "-c", "printf '%s' "+shQuote(w)).Output()
		if err != nil {
			t.Errorf("%q: %v", w, err)
			continue
		}
		if string(out) != w {
			t.Errorf("sh read %q back as %q (quoted %s)", w, out, shQuote(w))
		}
	}
	// Quoted twice, as the ENV step writes lines that are sourced later.
	for _, w := range trickyWords {
		line := "export V=" + shQuote(w)
		out, err := exec.Command(sh, "-c", "eval "+shQuote(line)+"; printf '%s' \"$V\"").Output()
		if err != nil || string(out) != w {
			t.Errorf("%q through export: %q, %v", w, out, err)
		}
	}
}
