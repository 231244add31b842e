package main

import (
	"strings"
	"testing"
)

const sampleRun = `=== RUN   TestNodeKilledDuringCreates
    faults_test.go:91: FAULT node-sigkill-creates: creates=181 failed=0
    faults_test.go:95: front file descriptors: 14 before, 16 after; goroutines: 23 before, 28 after
    restart_test.go:77: create                38/0               17/3              148/0                16ms/15ms  50ms (3.379s)
    process.go:28: some log line nobody quotes
--- PASS: TestNodeKilledDuringCreates (6.08s)
=== RUN   TestHungNode
    faults_test.go:263: a create took 15s while a node hung
    faults_test.go:295: FAULT node-sigstop: hung=15.01s creates=124 failed=1
--- FAIL: TestHungNode (27.30s)
    --- PASS: TestHungNode/sub (0.01s)
FAIL
`

func TestParseRunTakesResultsAndFigures(t *testing.T) {
	r := parseRun(sampleRun)
	if len(r.Tests) != 2 || !r.Tests[0].Passed || r.Tests[1].Passed || r.Tests[1].Name != "TestHungNode" {
		t.Fatalf("tests = %+v", r.Tests)
	}
	if got := r.failed(); len(got) != 1 || got[0] != "TestHungNode" {
		t.Errorf("failed = %v", got)
	}
	if len(r.Figures) != 4 || r.Figures[3].Test != "TestHungNode" || !strings.HasPrefix(r.Figures[3].Line, "faults_test.go:295: FAULT node-sigstop") {
		t.Errorf("figures = %+v", r.Figures)
	}
}

func TestMarkdownTalliesRuns(t *testing.T) {
	a, b := parseRun(sampleRun), parseRun(strings.ReplaceAll(sampleRun, "--- FAIL: TestHungNode", "--- PASS: TestHungNode"))
	a.Run, b.Run = 1, 2
	got := markdown(5, []runResult{a, b})
	for _, want := range []string{
		"Soak: 2 runs at scale 5",
		"| TestNodeKilledDuringCreates | 2 | 0 | 6.1s |",
		"| TestHungNode | 1 | 1 | 27.3s |",
		"failed: TestHungNode",
		"TestHungNode: faults_test.go:295: FAULT node-sigstop",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
}
