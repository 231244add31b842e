package monitoring_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
	"github.com/cocoonstack/sandbox-operator/tests/chartrender"
	"github.com/cocoonstack/sandbox-operator/tests/prometheus"
)

// releaseNamespace is the namespace the chart is rendered for; only the
// PrometheusRule's spec is used, so any name does.
const releaseNamespace = "monitoring-test"

// alertOverrides shorten the chart's alert durations to what a test can
// wait for; the expressions are the chart's own.
var alertOverrides = map[string]any{
	"poolBelowTarget": map[string]any{"for": "3s"},
}

// renderAlertRules renders the chart with its PrometheusRule on (and the
// durations above), and writes the rule's spec, a Prometheus rules file,
// into dir; it returns the file's path.
func renderAlertRules(t *testing.T, dir string) string {
	t.Helper()
	objs := chartrender.Render(t, releaseNamespace, map[string]any{
		"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true, "alerts": alertOverrides}},
	})
	rule := chartrender.Find(t, objs, "PrometheusRule")
	spec, _, err := unstructured.NestedMap(rule.Object, "spec")
	if err != nil {
		t.Fatalf("PrometheusRule %s: %v", rule.GetName(), err)
	}
	rules, err := yaml.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "sandbox-operator-rules.yaml")
	if err := os.WriteFile(path, rules, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// dashboardPanels reads the chart's Grafana dashboard into its panels'
// queries.
func dashboardPanels(t *testing.T) []prometheus.Panel {
	t.Helper()
	raw, err := fs.ReadFile(sandboxchart.Files, sandboxchart.DashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	panels, err := prometheus.Panels(raw)
	if err != nil {
		t.Fatalf("%s: %v", sandboxchart.DashboardPath, err)
	}
	return panels
}
