package chartrender_test

import (
	"reflect"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tests/chartrender"
)

const namespace = "chartrender-test"

// The --set form and the values-map form are two spellings of the same
// render, and a render is the same objects in the same order every time
// (the engine hands templates back in a map).
func TestRenderSetsIsRenderWithTheSameValues(t *testing.T) {
	fromSets := chartrender.RenderSets(t, namespace, "monitoring.prometheusRule.enabled=true")
	fromMap := chartrender.Render(t, namespace, map[string]any{
		"monitoring": map[string]any{"prometheusRule": map[string]any{"enabled": true}},
	})
	if len(fromSets) == 0 {
		t.Fatal("the render has no objects")
	}
	if !reflect.DeepEqual(fromSets, fromMap) {
		t.Errorf("RenderSets and Render with the same values differ:\n%d objects vs %d", len(fromSets), len(fromMap))
	}
	rule := chartrender.Find(t, fromSets, "PrometheusRule")
	if rule.GetNamespace() != namespace {
		t.Errorf("PrometheusRule in namespace %q, want %q", rule.GetNamespace(), namespace)
	}
}
