package main

import (
	"strings"
	"testing"
	"time"
)

const sampleOutput = `INFO: Build completed, 2 tests FAILED, 40 total actions
//src/fleet:fleet_test                                          (cached) PASSED in 3.1s
//src/simulator/faultlink:link_test                                  FLAKY, failed in 1 out of 3 in 1.2s
  /root/out/testlogs/src/simulator/link/link_test/run_2_of_3/test.log
//src/e2b:e2b_test                                                       FAILED in 3 out of 3 in 5.0s
//tests/e2e/install:install_test                                         TIMEOUT in 900.0s
//src/fleet:fleet_test                                          PASSED in 3.1s

Executed 4 out of 4 tests: 1 test passes and 3 fail locally.`

func TestParseSummary(t *testing.T) {
	s := parseSummary(sampleOutput)
	if len(s.targets) != 4 {
		t.Fatalf("parsed %d targets, want 4: %+v", len(s.targets), s.targets)
	}
	bad := s.notPassed()
	got := map[string]string{}
	for _, r := range bad {
		got[r.Label] = r.Status + " " + r.Detail
	}
	want := map[string]string{
		"//src/simulator/faultlink:link_test": "FLAKY failed in 1 out of 3 in 1.2s",
		"//src/e2b:e2b_test":                  "FAILED in 3 out of 3 in 5.0s",
		"//tests/e2e/install:install_test":    "TIMEOUT in 900.0s",
	}
	if len(got) != len(want) {
		t.Fatalf("not passed = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: %q, want %q", k, got[k], v)
		}
	}
}

func TestMarkdownNamesEveryTargetThatDidNotPass(t *testing.T) {
	s := parseSummary(sampleOutput)
	md := markdown(reportInfo{when: time.Date(2026, 12, 2, 7, 0, 0, 0, time.UTC), took: time.Minute, runs: 3, burners: 2, cpus: 2, targets: "//...", kernel: "6.18"}, s)
	for _, want := range []string{"1 of 4 targets passed every run", "`//src/simulator/faultlink:link_test` | FLAKY", "`//src/e2b:e2b_test` | FAILED", "beside 2 busy loops on 2 CPUs"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q:\n%s", want, md)
		}
	}
	if clean := markdown(reportInfo{}, parseSummary("//a:b PASSED in 1s")); strings.Contains(clean, "| target |") {
		t.Errorf("a clean run lists targets:\n%s", clean)
	}
}
