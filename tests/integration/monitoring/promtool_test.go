package monitoring_test

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cocoonstack/sandbox-operator/tests/chartrender"
)

// alertTests are the promtool unit tests of the alert group, written against
// the chart's default thresholds.
//
//go:embed testdata/alerts_test.yaml
var alertTests []byte

// rulesFileName is the name testdata/alerts_test.yaml loads the rules from,
// in its own directory.
const rulesFileName = "sandbox-operator.rules.yaml"

// promtoolTimeout bounds one promtool run; the unit tests evaluate about
// an hour of one-minute samples, well under a second of work.
const promtoolTimeout = 2 * time.Minute

// promtool finds promtool on PATH. The build's root carries Debian's
// prometheus package, which installs it; its absence is a broken
// environment, so the test fails rather than skips.
func promtool(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool is not on PATH (%v): the alert rules cannot be checked. "+
			"tools/bazel's root installs Debian's prometheus package, which ships it; "+
			"elsewhere install it (apt-get install prometheus, or a Prometheus release's promtool) and put it on PATH", err)
	}
	return path
}

// runPromtool runs promtool with args in dir and returns its combined
// output, failing the test when it exits non-zero.
func runPromtool(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), promtoolTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("promtool %s: %v\n%s", strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// writeRulesFile renders the chart with the PrometheusRule on (plus sets),
// takes its spec out as a plain Prometheus rules file, and writes it and the
// unit tests into a fresh directory, which it returns.
func writeRulesFile(t *testing.T, sets ...string) (dir string, rules []byte) {
	t.Helper()
	spec := prometheusRuleSpec(t, chartrender.RenderSets(t, releaseNamespace, append([]string{"monitoring.prometheusRule.enabled=true"}, sets...)...))
	if len(spec) != 1 || spec["groups"] == nil {
		t.Fatalf("PrometheusRule spec has fields %v, want only groups: a rules file is exactly that", mapKeys(spec))
	}
	rules, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatalf("marshal the rule groups: %v", err)
	}
	dir = t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, rulesFileName), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts_test.yaml"), alertTests, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, rules
}

// TestRenderedRulesPassPromtoolCheck: the rule group, as the chart renders
// it, is a rules file Prometheus would load (PromQL parses, durations,
// templates in annotations), with the defaults and with every threshold
// changed.
func TestRenderedRulesPassPromtoolCheck(t *testing.T) {
	for name, sets := range map[string][]string{
		"defaults": nil,
		"every value changed": {
			"monitoring.prometheusRule.runbookBaseURL=https://runbooks.example.com/sandboxes",
			"monitoring.prometheusRule.alerts.poolBelowTarget.for=30m",
			"monitoring.prometheusRule.alerts.claimLatency.p99Seconds=0.5",
			"monitoring.prometheusRule.alerts.claimLatency.window=10m",
			"monitoring.prometheusRule.alerts.inventoryStale.maxAgeSeconds=600",
			"monitoring.prometheusRule.alerts.dataPlaneErrors.ratio=0.01",
			"monitoring.prometheusRule.alerts.buildsStuck.window=1h30m",
			"monitoring.prometheusRule.alerts.apiServiceUnavailable.severity=page",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, rules := writeRulesFile(t, sets...)
			out := runPromtool(t, dir, "check", "rules", rulesFileName)
			t.Logf("promtool check rules:\n%s", out)
			// promtool reports what it found; an empty group would pass too.
			if want := fmt.Sprintf("SUCCESS: %d rules found", len(alertNames(t, rules))); !strings.Contains(out, want) {
				t.Errorf("promtool check rules said %q, want %q", out, want)
			}
		})
	}
}

// TestAlertsBehaveAsTheUnitTestsSay runs testdata/alerts_test.yaml against
// the rendered group with the chart's defaults.
func TestAlertsBehaveAsTheUnitTestsSay(t *testing.T) {
	dir, _ := writeRulesFile(t)
	out := runPromtool(t, dir, "test", "rules", "alerts_test.yaml")
	t.Logf("promtool test rules:\n%s", out)
}

// TestEveryAlertHasUnitTests: each alert of the rendered group has a case
// where it fires and one where it must not, and the unit tests name no alert
// the group lacks (promtool would pass a test of a renamed alert that
// expects nothing).
func TestEveryAlertHasUnitTests(t *testing.T) {
	_, rules := writeRulesFile(t)
	alerts := alertNames(t, rules)

	var file struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				AlertName string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(alertTests, &file); err != nil {
		t.Fatalf("testdata/alerts_test.yaml: %v", err)
	}
	if !slices.Equal(file.RuleFiles, []string{rulesFileName}) {
		t.Errorf("the unit tests load %v, want only %s (the rendered group)", file.RuleFiles, rulesFileName)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			if !slices.Contains(alerts, a.AlertName) {
				t.Errorf("the unit tests check %q, which the rendered group does not have (%v)", a.AlertName, alerts)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] {
			t.Errorf("no unit test expects %s to fire", a)
		}
		if !quiet[a] {
			t.Errorf("no unit test expects %s to stay quiet", a)
		}
	}
}

// alertNames lists the alerts of a rules file, in file order, failing on a
// rule that is not an alert or a group other than sandbox-operator.
func alertNames(t *testing.T, rules []byte) []string {
	t.Helper()
	var file struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := yaml.Unmarshal(rules, &file); err != nil {
		t.Fatalf("the rendered rules: %v", err)
	}
	if len(file.Groups) != 1 || file.Groups[0].Name != "sandbox-operator" {
		t.Fatalf("the rendered rules have %d groups (%+v), want the one group sandbox-operator", len(file.Groups), file.Groups)
	}
	var names []string
	for _, r := range file.Groups[0].Rules {
		if r.Alert == "" {
			t.Fatalf("the group has a rule that is not an alert: %+v", r)
		}
		names = append(names, r.Alert)
	}
	return names
}

func mapKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
