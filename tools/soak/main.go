// Command soak runs the fault suites longer, and again: the long variants
// of the fault table in docs/reliability.md, kept out of the default test
// run.
//
//	tools/bazel run //tools/soak -- --runs=3 --scale=5 [--only=REGEXP] [--out=FILE]
//	go run ./tools/soak --runs=3 --scale=5
//
// Each run is one
//
//	go test -count=1 -p 1 -v -run ONLY ./tests/e2e/faults ./tests/e2e/proxyfaults \
//	    ./tests/integration/controlplane ./tests/integration/warmpool
//
// with SANDBOX_SOAK_SCALE=scale, which makes the load around every fault
// that many times longer (testbin.Soaked) and the replica burst that many
// times larger; the fault windows and bounds stay what they are. The go
// tool's output streams to stderr; a Markdown report goes to stdout (and,
// with --out, to a file): every test's passes, failures and slowest run,
// then the figure lines each test logged, run by run. The exit status is 1
// when any test failed in any run.
//
// Under plain go test the suites build the binaries they run (the
// kube-apiserver takes minutes the first time, then the build cache has
// it). Under bazel run the module is BUILD_WORKSPACE_DIRECTORY and the go
// tool is the Go SDK's that rules_go registers (tools/gotool).
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
	"strconv"

	"github.com/cocoonstack/sandbox-operator/tools/gotool"
)

// goRlocation is the runfiles location of rules_go's go command, set by
// the go_binary's x_defs; empty in a go run build.
var goRlocation string

// suites are the fault suites, in the order they run.
var suites = []string{
	"./tests/e2e/faults",
	"./tests/e2e/proxyfaults",
	"./tests/integration/controlplane",
	"./tests/integration/warmpool",
}

// scaleEnv is testbin.SoakScaleEnv; tools do not import test helpers.
const scaleEnv = "SANDBOX_SOAK_SCALE"

func main() {
	log.SetFlags(0)
	log.SetPrefix("soak: ")
	fs := flag.NewFlagSet("soak", flag.ExitOnError)
	runs := fs.Int("runs", 3, "how many times to run the suites")
	scale := fs.Int("scale", 5, "how many times longer the load around each fault, and larger the replica burst ("+scaleEnv+")")
	only := fs.String("only", ".", "go test -run: which tests of the suites to run")
	out := fs.String("out", "", "also write the Markdown report to this file (relative to the directory the command was started in)")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		log.Fatalf("unexpected arguments %q", fs.Args())
	}
	if *runs < 1 || *scale < 1 {
		log.Fatalf("--runs and --scale must be at least 1, got %d and %d", *runs, *scale)
	}

	root, _, err := gotool.ModuleRoot()
	if err != nil {
		log.Fatal(err)
	}
	goCmd, env := gotool.Command(root, goRlocation)
	env = append(env, scaleEnv+"="+strconv.Itoa(*scale))

	var all []runResult
	for i := 1; i <= *runs; i++ {
		fmt.Fprintf(os.Stderr, "== run %d of %d, scale %d\n", i, *runs, *scale)
		args := append([]string{"test", "-count=1", "-p", "1", "-v", "-timeout", "90m", "-run", *only}, suites...)
		cmd := exec.Command(goCmd, args...)
		cmd.Dir, cmd.Env = root, env
		var buf bytes.Buffer
		cmd.Stdout = io.MultiWriter(os.Stderr, &buf)
		cmd.Stderr = cmd.Stdout
		runErr := cmd.Run()
		r := parseRun(buf.String())
		r.Run = i
		if runErr != nil && len(r.failed()) == 0 {
			// A build error or a crash outside any test still fails the run.
			r.Err = runErr.Error()
		}
		all = append(all, r)
	}

	report := markdown(*scale, all)
	fmt.Print(report)
	if *out != "" {
		path := *out
		if wd := os.Getenv("BUILD_WORKING_DIRECTORY"); wd != "" && !filepath.IsAbs(path) {
			path = filepath.Join(wd, path)
		}
		if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	for _, r := range all {
		if r.Err != "" || len(r.failed()) > 0 {
			os.Exit(1)
		}
	}
}
