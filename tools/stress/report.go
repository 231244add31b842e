package main

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"
)

// targetResult is one test target's line of Bazel's summary.
type targetResult struct {
	Label  string
	Status string // PASSED, FLAKY, FAILED, TIMEOUT, NO STATUS, …
	Detail string // the rest of the line ("failed in 1 out of 3", …)
}

type summary struct {
	targets []targetResult
	err     string
}

func (s summary) notPassed() []targetResult {
	var out []targetResult
	for _, t := range s.targets {
		if t.Status != "PASSED" {
			out = append(out, t)
		}
	}
	return out
}

// summaryLine matches a target's line of Bazel's test summary:
//
//	//src/fleet:fleet_test     PASSED in 3.1s
//	//src/x:x_test             FLAKY, failed in 1 out of 3 in 2.0s
//	//src/y:y_test             FAILED in 3 out of 3 in 1.2s
//	//src/z:z_test             TIMEOUT in 300.0s
var summaryLine = regexp.MustCompile(`^(//\S+)\s+(?:\(cached\) )?(PASSED|FLAKY|FAILED|TIMEOUT|NO STATUS|INCOMPLETE|FAILED TO BUILD|SKIPPED)(.*)$`)

// parseSummary reads the targets' results from Bazel's output.
func parseSummary(out string) summary {
	var s summary
	seen := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		m := summaryLine.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil || seen[m[1]] {
			continue
		}
		seen[m[1]] = true
		s.targets = append(s.targets, targetResult{Label: m[1], Status: m[2], Detail: strings.Trim(m[3], " ,")})
	}
	sort.Slice(s.targets, func(i, j int) bool { return s.targets[i].Label < s.targets[j].Label })
	return s
}

type reportInfo struct {
	when          time.Time
	took          time.Duration
	runs, burners int
	cpus          int
	targets       string
	kernel        string
}

// markdown is the report: the run, then every target that did not pass.
func markdown(info reportInfo, s summary) string {
	var b strings.Builder
	fmt.Fprintf(&b, "# Stress run, %s\n\n", info.when.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "`%s`, each test %d times (`--runs_per_test`), beside %d busy loops on %d CPUs (kernel %s); %s.\n\n",
		info.targets, info.runs, info.burners, info.cpus, info.kernel, info.took.Round(time.Second))
	passed := len(s.targets) - len(s.notPassed())
	fmt.Fprintf(&b, "%d of %d targets passed every run.\n", passed, len(s.targets))
	if s.err != "" {
		fmt.Fprintf(&b, "\nBazel itself failed: %s\n", s.err)
	}
	if bad := s.notPassed(); len(bad) > 0 {
		b.WriteString("\n| target | result |\n|---|---|\n")
		for _, t := range bad {
			fmt.Fprintf(&b, "| `%s` | %s %s |\n", t.Label, t.Status, t.Detail)
		}
	}
	return b.String()
}
