// Command fuzz runs every native Go fuzz target of the module, one after
// another, for a set time each, and reports what each one did: the
// executions, the new interesting inputs and whether it found a crash.
//
//	go run ./tools/fuzz --time=60s [--only=REGEXP] [--out=FILE]
//	tools/bazel run //tools/fuzz -- --time=60s
//
// The targets are found by parsing the module's *_test.go files for
// func FuzzX(*testing.F), so a new target is picked up without editing
// anything here. Each runs as
//
//	go test -run '^$' -fuzz '^FuzzX$' -fuzztime D -parallel N ./pkg
//
// with the go tool's progress on stderr; the Markdown table goes to stdout
// and, with --out, to a file. The exit status is 1 when any target failed
// (a crash, whose input the go tool writes under the package's
// testdata/fuzz/FuzzX/, or a build error).
//
// Under bazel run the module is BUILD_WORKSPACE_DIRECTORY and the go tool
// is the one of the Go SDK rules_go registers (@io_bazel_rules_go//go, a
// data dependency); under go run it is the go on PATH.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/tools/gotool"
)

// goRlocation is the runfiles location of rules_go's go command, set by
// the go_binary's x_defs; empty in a go run build.
var goRlocation string

// durations is a repeatable --time-for=FuzzX=D flag.
type durations map[string]time.Duration

func (d durations) String() string { return fmt.Sprint(map[string]time.Duration(d)) }

func (d durations) Set(s string) error {
	name, v, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("want FuzzName=duration, got %q", s)
	}
	dur, err := time.ParseDuration(v)
	if err != nil {
		return err
	}
	d[name] = dur
	return nil
}

func main() {
	log.SetFlags(0)
	log.SetPrefix("fuzz: ")
	fs := flag.NewFlagSet("fuzz", flag.ExitOnError)
	perTarget := fs.Duration("time", 60*time.Second, "how long to fuzz each target (go test -fuzztime)")
	only := fs.String("only", "", "run only the targets whose name matches this regexp")
	out := fs.String("out", "", "also write the Markdown table to this file (relative to the directory the command was started in)")
	parallel := fs.Int("parallel", 2, "fuzzing workers per target (go test -parallel)")
	overrides := durations{}
	fs.Var(overrides, "time-for", "FuzzName=duration: fuzz that target for this long instead of --time (repeatable)")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		log.Fatalf("unexpected arguments %q", fs.Args())
	}
	var filter *regexp.Regexp
	if *only != "" {
		var err error
		if filter, err = regexp.Compile(*only); err != nil {
			log.Fatalf("--only: %v", err)
		}
	}

	root, modPath, err := gotool.ModuleRoot()
	if err != nil {
		log.Fatal(err)
	}
	targets, err := discover(root, modPath)
	if err != nil {
		log.Fatal(err)
	}
	var picked []target
	for _, t := range targets {
		if filter == nil || filter.MatchString(t.Name) {
			picked = append(picked, t)
		}
	}
	if len(picked) == 0 {
		log.Fatalf("no fuzz target matches (found %d in %s)", len(targets), root)
	}
	goCmd, goEnv := gotool.Command(root, goRlocation)
	fmt.Fprintf(os.Stderr, "== module %s at %s, go command %s, %d targets\n", modPath, root, goCmd, len(picked))

	var results []result
	failed := false
	for i, t := range picked {
		d := *perTarget
		if o, ok := overrides[t.Name]; ok {
			d = o
		}
		fmt.Fprintf(os.Stderr, "== [%d/%d] %s (%s) for %s\n", i+1, len(picked), t.Name, t.Pkg, d)
		r := run(root, goCmd, goEnv, t, d, *parallel)
		if r.Result != "ok" {
			failed = true
			fmt.Fprintf(os.Stderr, "== %s: %s\n", t.Name, r.Result)
		}
		results = append(results, r)
	}

	table := markdown(results)
	fmt.Print(table)
	if *out != "" {
		path := *out
		if wd := os.Getenv("BUILD_WORKING_DIRECTORY"); wd != "" && !filepath.IsAbs(path) {
			path = filepath.Join(wd, path)
		}
		if err := os.WriteFile(path, []byte(table), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// run fuzzes one target and reads its result from the go tool's output.
func run(root, goCmd string, env []string, t target, d time.Duration, parallel int) result {
	args := []string{"test", "-run", "^$", "-fuzz", "^" + t.Name + "$",
		"-fuzztime", d.String(), "-parallel", fmt.Sprint(parallel),
		// Fuzzing has no default timeout; a hung target still ends.
		"-timeout", (d + 10*time.Minute).String(),
		"./" + filepath.ToSlash(t.Dir)}
	cmd := exec.Command(goCmd, args...)
	cmd.Dir = root
	cmd.Env = env
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(os.Stderr, &buf)
	cmd.Stderr = cmd.Stdout
	start := time.Now()
	err := cmd.Run()
	r := parseOutput(buf.String())
	r.Target, r.Pkg, r.Requested = t.Name, t.Pkg, d
	if r.Elapsed == 0 {
		r.Elapsed = time.Since(start).Round(time.Second)
	}
	switch {
	case r.Crasher != "":
		r.Crasher = filepath.ToSlash(filepath.Join(t.Dir, r.Crasher))
		r.Result = "crash: " + r.Crasher
		fmt.Fprintf(os.Stderr, "== reproduce: go test -run '^%s$/^%s$' ./%s\n", t.Name, filepath.Base(r.Crasher), filepath.ToSlash(t.Dir))
	case err != nil:
		r.Result = "failed: " + err.Error()
	case !r.Parsed:
		r.Result = "failed: no fuzzing progress in the go tool's output"
	default:
		r.Result = "ok"
	}
	return r
}
