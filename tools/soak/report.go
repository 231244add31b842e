package main

import (
	"fmt"
	"regexp"
	"strings"
	"time"
)

// runResult is what one run of the suites did.
type runResult struct {
	Run int
	// Tests are the top-level tests' results by name, in order.
	Tests []testResult
	// Figures are the lines tests logged that a fault table quotes.
	Figures []figure
	// Err is a failure outside any test (a build error).
	Err string
}

type testResult struct {
	Name    string
	Passed  bool
	Elapsed time.Duration
}

type figure struct {
	Test, Line string
}

func (r runResult) failed() []string {
	var out []string
	for _, t := range r.Tests {
		if !t.Passed {
			out = append(out, t.Name)
		}
	}
	return out
}

var (
	// A top-level test's end; subtests are indented and not counted.
	resultLine = regexp.MustCompile(`^--- (PASS|FAIL): (\w+) \(([0-9.]+)s\)`)
	runLine    = regexp.MustCompile(`^=== (?:RUN|CONT)\s+(\w+)`)
	// The figures the suites log for docs/reliability.md.
	figureLine = regexp.MustCompile(`(FAULT |fault: |: (?:kind|create|delete|list) {2,}|burst: |creates answered|failed first attempts|every name resolved|fleet: |names raced|takeover|goroutines|file descriptors)`)
)

// parseRun reads go test -v output.
func parseRun(out string) runResult {
	var r runResult
	current := ""
	for _, line := range strings.Split(out, "\n") {
		if m := runLine.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if m := resultLine.FindStringSubmatch(line); m != nil {
			secs, _ := time.ParseDuration(m[3] + "s")
			r.Tests = append(r.Tests, testResult{Name: m[2], Passed: m[1] == "PASS", Elapsed: secs})
			continue
		}
		if current != "" && strings.HasPrefix(line, "    ") && figureLine.MatchString(line) {
			r.Figures = append(r.Figures, figure{Test: current, Line: strings.TrimSpace(line)})
		}
	}
	return r
}

// markdown is the report of every run.
func markdown(scale int, runs []runResult) string {
	type tally struct {
		passed, failed int
		slowest        time.Duration
	}
	var names []string
	tallies := map[string]*tally{}
	for _, r := range runs {
		for _, t := range r.Tests {
			tl, ok := tallies[t.Name]
			if !ok {
				tl = &tally{}
				tallies[t.Name] = tl
				names = append(names, t.Name)
			}
			if t.Passed {
				tl.passed++
			} else {
				tl.failed++
			}
			tl.slowest = max(tl.slowest, t.Elapsed)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Soak: %d runs at scale %d (SANDBOX_SOAK_SCALE).\n\n", len(runs), scale)
	b.WriteString("| test | passed | failed | slowest run |\n|---|---:|---:|---:|\n")
	for _, n := range names {
		tl := tallies[n]
		fmt.Fprintf(&b, "| %s | %d | %d | %v |\n", n, tl.passed, tl.failed, tl.slowest.Round(100*time.Millisecond))
	}
	for _, r := range runs {
		fmt.Fprintf(&b, "\n### Run %d\n\n", r.Run)
		if r.Err != "" {
			fmt.Fprintf(&b, "failed outside any test: %s\n\n", r.Err)
		}
		if f := r.failed(); len(f) > 0 {
			fmt.Fprintf(&b, "failed: %s\n\n", strings.Join(f, ", "))
		}
		b.WriteString("```\n")
		for _, f := range r.Figures {
			fmt.Fprintf(&b, "%s: %s\n", f.Test, f.Line)
		}
		b.WriteString("```\n")
	}
	if len(names) == 0 {
		b.WriteString("\nNo test ran.\n")
	}
	return b.String()
}
