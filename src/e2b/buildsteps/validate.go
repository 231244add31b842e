package buildsteps

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Bounds on a definition, so that one request cannot make the runner hold
// or send more than a build plausibly needs.
const (
	MaxSteps    = 1000
	MaxArgBytes = 64 << 10
)

var (
	// filesHashPattern is the SDK's key of an uploaded archive: a
	// lowercase hex SHA-256, which the archive store uses as a file name.
	filesHashPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)
	// envNamePattern is what a shell accepts after export; anything else
	// could not be written to the profile script.
	envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)
	// userPattern is a conservative Linux user name. It keeps ':' out,
	// which would corrupt both the Basic authorization envd reads the user
	// from and chown's user:group argument.
	userPattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$`)
	// modePattern is an octal permission as the SDK pads it ("0755").
	modePattern = regexp.MustCompile(`^[0-7]{3,4}$`)
)

// stepName is how logs and errors name steps[i]: 1-based, as the SDK maps
// it back to the user's source.
func stepName(i int) string { return strconv.Itoa(i + 1) }

// Validate refuses a definition that cannot run here, naming the step at
// fault. It checks only what the runner relies on; whether the base exists
// is the caller's to decide.
func (t Template) Validate() error {
	if t.registryGiven() {
		return errors.New("fromImageRegistry: private registries are not supported here")
	}
	if t.FromImage != "" && t.FromTemplate != "" {
		return errors.New("set one of fromImage and fromTemplate, not both")
	}
	if len(t.Steps) > MaxSteps {
		return fmt.Errorf("%d steps given, at most %d are allowed", len(t.Steps), MaxSteps)
	}
	if err := checkArg(t.StartCmd); err != nil {
		return fmt.Errorf("startCmd: %w", err)
	}
	if err := checkArg(t.ReadyCmd); err != nil {
		return fmt.Errorf("readyCmd: %w", err)
	}
	for i, s := range t.Steps {
		if err := s.validate(); err != nil {
			if knownType(s.Type) {
				return fmt.Errorf("step %s (%s): %w", stepName(i), s.Type, err)
			}
			return fmt.Errorf("step %s: %w", stepName(i), err)
		}
	}
	return nil
}

func knownType(t string) bool {
	switch t {
	case TypeRun, TypeCopy, TypeEnv, TypeWorkdir, TypeUser:
		return true
	}
	return false
}

func (s Step) validate() error {
	if !knownType(s.Type) {
		// The type is the client's string: quoted and cut short.
		t := s.Type
		if len(t) > 32 {
			t = t[:32]
		}
		return fmt.Errorf("unknown step type %q (want RUN, COPY, ENV, WORKDIR or USER)", t)
	}
	for i, a := range s.Args {
		if err := checkArg(a); err != nil {
			return fmt.Errorf("argument %d: %w", i+1, err)
		}
	}
	switch s.Type {
	case TypeRun:
		return s.validateRun()
	case TypeCopy:
		return s.validateCopy()
	case TypeEnv:
		return s.validateEnv()
	case TypeWorkdir:
		if err := argCount(s.Args, 1, 1); err != nil {
			return err
		}
		if strings.TrimSpace(s.Args[0]) == "" {
			return errors.New("an empty directory")
		}
		return nil
	default: // TypeUser
		if err := argCount(s.Args, 1, 1); err != nil {
			return err
		}
		return checkUser(s.Args[0])
	}
}

func (s Step) validateRun() error {
	if err := argCount(s.Args, 1, 2); err != nil {
		return err
	}
	if strings.TrimSpace(s.Args[0]) == "" {
		return errors.New("an empty command")
	}
	if len(s.Args) == 2 && s.Args[1] != "" {
		return checkUser(s.Args[1])
	}
	return nil
}

// validateCopy checks [src, dest, user, mode]; the SDK always sends all
// four, older clients may leave the optional two off.
func (s Step) validateCopy() error {
	if err := argCount(s.Args, 2, 4); err != nil {
		return err
	}
	if !filesHashPattern.MatchString(s.FilesHash) {
		return errors.New("filesHash must be the 64 lowercase hex digits of the uploaded archive's hash")
	}
	if err := checkSource(s.Args[0]); err != nil {
		return err
	}
	if strings.TrimSpace(s.Args[1]) == "" {
		return errors.New("an empty destination")
	}
	if len(s.Args) > 2 && s.Args[2] != "" {
		if err := checkUser(s.Args[2]); err != nil {
			return err
		}
	}
	if len(s.Args) > 3 && s.Args[3] != "" && !modePattern.MatchString(s.Args[3]) {
		return fmt.Errorf("mode %q is not an octal permission such as 0755", s.Args[3])
	}
	return nil
}

func (s Step) validateEnv() error {
	if len(s.Args) == 0 || len(s.Args)%2 != 0 {
		return fmt.Errorf("%d arguments given; want name and value pairs", len(s.Args))
	}
	for i := 0; i < len(s.Args); i += 2 {
		if !envNamePattern.MatchString(s.Args[i]) {
			return fmt.Errorf("%q is not a valid environment variable name", s.Args[i])
		}
	}
	return nil
}

// checkSource refuses a COPY source that does not name something inside
// the uploaded context: the archive holds paths relative to it.
func checkSource(src string) error {
	if strings.TrimSpace(src) == "" {
		return errors.New("an empty source")
	}
	if strings.HasPrefix(src, "/") {
		return fmt.Errorf("source %q is absolute; it must be relative to the build context", src)
	}
	for part := range strings.SplitSeq(src, "/") {
		if part == ".." {
			return fmt.Errorf("source %q leaves the build context", src)
		}
	}
	return nil
}

func checkUser(u string) error {
	if !userPattern.MatchString(u) {
		return fmt.Errorf("%q is not a valid user name", u)
	}
	return nil
}

// checkArg refuses what no command line can carry.
func checkArg(a string) error {
	if len(a) > MaxArgBytes {
		return fmt.Errorf("%d bytes long, over the %d allowed", len(a), MaxArgBytes)
	}
	if strings.IndexByte(a, 0) >= 0 {
		return errors.New("contains a NUL byte")
	}
	return nil
}

func argCount(args []string, lo, hi int) error {
	if len(args) < lo || len(args) > hi {
		if lo == hi {
			return fmt.Errorf("%d arguments given, want %d", len(args), lo)
		}
		return fmt.Errorf("%d arguments given, want %d to %d", len(args), lo, hi)
	}
	return nil
}
