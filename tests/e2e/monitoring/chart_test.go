package monitoring_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
	"github.com/cocoonstack/sandbox-operator/tests/chartrender"
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

// panel is one query of one dashboard panel.
type panel struct{ title, expr string }

func errNoData(p panel) error { return &noDataError{p} }

type noDataError struct{ p panel }

func (e *noDataError) Error() string { return "panel " + e.p.title + ": no data for " + e.p.expr }

// dashboardPanels reads the chart's Grafana dashboard and returns every
// panel's queries, with Grafana's variables replaced by what Grafana
// would send for a short range ($__rate_interval).
func dashboardPanels(t *testing.T) []panel {
	t.Helper()
	raw, err := fs.ReadFile(sandboxchart.Files, sandboxchart.DashboardPath)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatalf("%s: %v", sandboxchart.DashboardPath, err)
	}
	var out []panel
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			expr := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "15s", "$__range", "5m").Replace(target.Expr)
			out = append(out, panel{title: p.Title, expr: expr})
		}
	}
	return out
}
