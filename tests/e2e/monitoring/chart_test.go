package monitoring_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
)

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
	ch, err := sandboxchart.Load()
	if err != nil {
		t.Fatal(err)
	}
	values, err := chartutil.ToRenderValues(ch, map[string]any{
		"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true, "alerts": alertOverrides}},
	}, chartutil.ReleaseOptions{Name: "sandbox-operator", Namespace: "monitoring-test", IsInstall: true}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := engine.Engine{Strict: true}.Render(ch, values)
	if err != nil {
		t.Fatalf("render the chart: %v", err)
	}
	for name, body := range rendered {
		if !strings.HasSuffix(name, ".yaml") {
			continue
		}
		for _, doc := range releaseutil.SplitManifests(body) {
			var obj struct {
				Kind string         `json:"kind"`
				Spec map[string]any `json:"spec"`
			}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if obj.Kind != "PrometheusRule" {
				continue
			}
			rules, err := yaml.Marshal(obj.Spec)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(dir, "sandbox-operator-rules.yaml")
			if err := os.WriteFile(path, rules, 0o600); err != nil {
				t.Fatal(err)
			}
			return path
		}
	}
	t.Fatal("the chart rendered no PrometheusRule with monitoring.prometheusRule.enabled")
	return ""
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
