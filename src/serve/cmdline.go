package serve

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/pflag"
)

// Exit codes of every binary here; 2 is the conventional one for a bad
// command line.
const (
	ExitOK      = 0
	ExitFailure = 1
	ExitUsage   = 2
)

// ParseCommandLine parses a binary's flags the way every binary here does:
// --help prints usage and the flags on stdout and exits 0; a bad flag or a
// stray argument is said on stderr, with a pointer to --help, and exits 2.
// ok is false when the binary should exit with the code returned.
func ParseCommandLine(fs *pflag.FlagSet, usage string, args []string, stdout, stderr io.Writer) (exit int, ok bool) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	err := fs.Parse(args)
	switch {
	case errors.Is(err, pflag.ErrHelp):
		fmt.Fprint(stdout, usage, fs.FlagUsages())
		return ExitOK, false
	case err == nil && fs.NArg() > 0:
		err = fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if err != nil {
		return UsageError(stderr, fs.Name(), err), false
	}
	return ExitOK, true
}

// UsageError says a command-line mistake found after parsing (a flag value
// the binary refuses) the same way, and returns ExitUsage.
func UsageError(stderr io.Writer, name string, err error) int {
	fmt.Fprintf(stderr, "%s: %v\nRun '%s --help' for the flags.\n", name, err, name)
	return ExitUsage
}
