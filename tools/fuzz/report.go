package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// result is one target's run.
type result struct {
	Target, Pkg string
	Requested   time.Duration
	// Elapsed, Execs and NewInteresting come from the go tool's last
	// progress line; Parsed says whether there was one.
	Elapsed        time.Duration
	Execs          int64
	NewInteresting int64
	Parsed         bool
	// Crasher is where the go tool wrote a failing input, relative to the
	// package directory (run makes it relative to the module root).
	Crasher string
	Result  string
}

// progressLine matches the go tool's fuzzing progress, e.g.
//
//	fuzz: elapsed: 45s, execs: 1234567 (27434/sec), new interesting: 12 (total: 80)
var progressLine = regexp.MustCompile(`fuzz: elapsed: (\S+), execs: (\d+) \(\d+/sec\)(?:, new interesting: (\d+) \(total: \d+\))?`)

// crasherLine matches where the go tool saved a failing input.
var crasherLine = regexp.MustCompile(`Failing input written to (\S+)`)

// parseOutput reads the last progress line and any crasher path from the
// output of one go test -fuzz run.
func parseOutput(out string) result {
	var r result
	for _, line := range strings.Split(out, "\n") {
		if m := progressLine.FindStringSubmatch(line); m != nil {
			d, err := time.ParseDuration(m[1])
			execs, err2 := strconv.ParseInt(m[2], 10, 64)
			if err != nil || err2 != nil {
				continue
			}
			r.Elapsed, r.Execs, r.Parsed = d, execs, true
			r.NewInteresting = 0
			if m[3] != "" {
				r.NewInteresting, _ = strconv.ParseInt(m[3], 10, 64)
			}
		}
		if m := crasherLine.FindStringSubmatch(line); m != nil && r.Crasher == "" {
			r.Crasher = m[1]
		}
	}
	return r
}

// markdown renders the results as a table plus a total line.
func markdown(rs []result) string {
	var b strings.Builder
	b.WriteString("| target | package | time | executions | new interesting inputs | result |\n")
	b.WriteString("|---|---|---:|---:|---:|---|\n")
	var execs int64
	var elapsed time.Duration
	for _, r := range rs {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %s |\n",
			r.Target, r.Pkg, r.Elapsed, group(r.Execs), r.NewInteresting, strings.ReplaceAll(r.Result, "|", `\|`))
		execs += r.Execs
		elapsed += r.Elapsed
	}
	fmt.Fprintf(&b, "| **total** | %d targets | %s | %s | | |\n", len(rs), elapsed, group(execs))
	return b.String()
}

// group writes n with thousands separators: 1234567 is 1,234,567.
func group(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + group(-n)
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
