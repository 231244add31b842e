// Package monitoring_test checks the chart's monitoring objects outside Helm:
//
//   - the alert group the PrometheusRule carries is a rules file promtool
//     accepts (`promtool check rules`), and every alert fires and stays
//     quiet as testdata/alerts_test.yaml expects (`promtool test rules`);
//   - a kube-apiserver with prometheus-operator's own CRDs installed
//     (tests/testdata/prometheus-operator-crds, copied from its Go module
//     by tools/prometheus-operator-crds.sh) accepts every monitoring object
//     of a render with monitoring on in a server-side dry run with strict
//     field validation, and refuses broken variants of them.
//
// Neither Prometheus nor prometheus-operator runs: what is proven is the
// rules' PromQL and behaviour over given series, and the objects' schema.
package monitoring_test

import (
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// releaseNamespace is the namespace the chart is rendered for (with
// tests/chartrender), one no template could hard-code.
const releaseNamespace = "sandbox-monitoring-test"

// e2bOn turns on the e2b surface, and with it the envd proxy, whose
// ServiceMonitor and metrics Service exist only then.
var e2bOn = []string{
	"apiserver.e2b.enabled=true",
	"apiserver.e2b.domain=sandbox.example.com",
	"apiserver.e2b.apiKeySecret.name=e2b-api-keys",
	"apiserver.e2b.envdSecret.secretName=e2b-envd-secret",
	"apiserver.sandboxdToken.secretName=sandboxd-token",
}

// monitoringOn turns on every monitoring object, over e2bOn.
var monitoringOn = append(slices.Clone(e2bOn),
	"monitoring.serviceMonitor.enabled=true",
	"monitoring.serviceMonitor.prometheusServiceAccount.name=prometheus",
	"monitoring.serviceMonitor.prometheusServiceAccount.namespace=monitoring",
	"monitoring.prometheusRule.enabled=true",
	"monitoring.grafanaDashboard.enabled=true",
)

// prometheusRuleSpec returns the spec of the render's one PrometheusRule.
func prometheusRuleSpec(t *testing.T, objs []*unstructured.Unstructured) map[string]any {
	t.Helper()
	var specs []map[string]any
	for _, o := range objs {
		if o.GetKind() == "PrometheusRule" {
			spec, _, err := unstructured.NestedMap(o.Object, "spec")
			if err != nil {
				t.Fatalf("PrometheusRule %s: %v", o.GetName(), err)
			}
			specs = append(specs, spec)
		}
	}
	if len(specs) != 1 {
		t.Fatalf("the render has %d PrometheusRules, want 1", len(specs))
	}
	return specs[0]
}
