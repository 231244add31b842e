// Command stress runs the test suite several times over with the CPUs kept
// busy beside it, the way a shared CI machine runs it, and reports every
// test that did not pass each time: a test that only passes on an idle
// machine is broken, and this is where it shows.
//
//	go run ./tools/stress [--runs=3] [--burners=2] [--targets=//...] [--out=FILE]
//
// It starts --burners busy loops (one per CPU by default), then runs
//
//	tools/bazel test TARGETS --runs_per_test=RUNS --nocache_test_results \
//	    --keep_going --test_output=errors
//
// in the module's root, streaming Bazel's output to stderr. A Markdown
// report goes to stdout (and, with --out, to a file): the date, the
// machine, the load, and each target that failed or was flaky with how
// often. The exit status is 1 when any target did not pass every run.
//
// It drives tools/bazel itself, so it runs with go run on the host rather
// than under bazel run (which would start it inside Bazel's root, where
// tools/bazel cannot provision).
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
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/tools/gotool"
)

func main() {
	log.SetFlags(0)
	log.SetPrefix("stress: ")
	fs := flag.NewFlagSet("stress", flag.ExitOnError)
	runs := fs.Int("runs", 3, "how many times Bazel runs each test (--runs_per_test)")
	burners := fs.Int("burners", runtime.NumCPU(), "busy loops kept running beside the tests")
	targets := fs.String("targets", "//...", "the test target patterns, separated by spaces")
	out := fs.String("out", "", "also write the Markdown report to this file")
	_ = fs.Parse(os.Args[1:])
	if fs.NArg() > 0 {
		log.Fatalf("unexpected arguments %q", fs.Args())
	}
	if *runs < 1 || *burners < 0 {
		log.Fatalf("--runs must be at least 1 and --burners not negative, got %d and %d", *runs, *burners)
	}
	root, _, err := gotool.ModuleRoot()
	if err != nil {
		log.Fatal(err)
	}

	stop := burn(*burners)
	start := time.Now()
	args := append([]string{"test"}, strings.Fields(*targets)...)
	args = append(args, "--runs_per_test="+strconv.Itoa(*runs),
		"--nocache_test_results", "--keep_going", "--test_output=errors")
	cmd := exec.Command(filepath.Join(root, "tools", "bazel"), args...)
	cmd.Dir = root
	var buf bytes.Buffer
	cmd.Stdout = io.MultiWriter(os.Stderr, &buf)
	cmd.Stderr = cmd.Stdout
	runErr := cmd.Run()
	stop()

	res := parseSummary(buf.String())
	if runErr != nil && len(res.notPassed()) == 0 {
		// A build failure or a crash of Bazel itself fails the run too.
		res.err = runErr.Error()
	}
	report := markdown(reportInfo{
		when: start, took: time.Since(start), runs: *runs, burners: *burners,
		cpus: runtime.NumCPU(), targets: *targets, kernel: kernelRelease(),
	}, res)
	fmt.Print(report)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(report), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	if res.err != "" || len(res.notPassed()) > 0 {
		os.Exit(1)
	}
}

// kernelRelease names the kernel the run was on.
func kernelRelease() string {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	if err != nil {
		return "unknown"
	}
	return string(bytes.TrimSpace(b))
}
