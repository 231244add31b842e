// Package chartrender renders the sandbox-operator Helm chart into objects,
// for tests that check what the chart produces without installing it. It
// renders as `helm template` does, with Helm's library in strict mode, from
// the embedded chart files (the same bytes under go test and Bazel), so a
// test sees exactly the objects an install would create.
//
// It is test-only code: every function takes a testing.TB and fails the
// test on error.
package chartrender

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
)

// ReleaseName is the release every render is for: the name the chart's
// documentation installs under.
const ReleaseName = "sandbox-operator"

// Render renders the chart for a release in namespace with values over the
// chart's defaults (nil for the defaults alone) and returns the templates'
// objects in file-name order, then document order within a file. The chart's
// CRDs (crds/) are not templates and are not among them.
func Render(t testing.TB, namespace string, values map[string]any) []*unstructured.Unstructured {
	t.Helper()
	objs, err := render(namespace, values)
	if err != nil {
		t.Fatalf("render the chart in namespace %s with values %v: %v", namespace, values, err)
	}
	return objs
}

// RenderSets is Render with values given as `helm template --set`
// expressions, e.g. "monitoring.prometheusRule.enabled=true".
func RenderSets(t testing.TB, namespace string, sets ...string) []*unstructured.Unstructured {
	t.Helper()
	values := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, values); err != nil {
			t.Fatalf("--set %s: %v", s, err)
		}
	}
	objs, err := render(namespace, values)
	if err != nil {
		t.Fatalf("render the chart in namespace %s with --set %v: %v", namespace, sets, err)
	}
	return objs
}

// Find returns the first object of kind in objs, and fails the test when
// there is none.
func Find(t testing.TB, objs []*unstructured.Unstructured, kind string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind {
			return o
		}
	}
	t.Fatalf("the render has no %s", kind)
	return nil
}

// YAML prints o for a failure message; an object that cannot be printed
// says why instead, since the message matters more than the print.
func YAML(o *unstructured.Unstructured) string {
	b, err := yaml.Marshal(o.Object)
	if err != nil {
		return fmt.Sprintf("(unprintable: %v)", err)
	}
	return string(b)
}

func render(namespace string, values map[string]any) ([]*unstructured.Unstructured, error) {
	ch, err := sandboxchart.Load()
	if err != nil {
		return nil, fmt.Errorf("load the chart: %w", err)
	}
	if values == nil {
		values = map[string]any{}
	}
	renderValues, err := chartutil.ToRenderValues(ch, values, chartutil.ReleaseOptions{
		Name: ReleaseName, Namespace: namespace, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		return nil, fmt.Errorf("render values: %w", err)
	}
	rendered, err := engine.Engine{Strict: true}.Render(ch, renderValues)
	if err != nil {
		return nil, fmt.Errorf("render templates: %w", err)
	}

	// The engine and SplitManifests return maps; sorting their keys gives
	// every run the same order, so "the first Certificate" is always the
	// same object.
	names := make([]string, 0, len(rendered))
	for name := range rendered {
		if strings.HasSuffix(name, ".yaml") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		docs := releaseutil.SplitManifests(rendered[name])
		keys := make([]string, 0, len(docs))
		for key := range docs {
			keys = append(keys, key)
		}
		sort.Sort(releaseutil.BySplitManifestsOrder(keys))
		for _, key := range keys {
			doc := docs[key]
			// Strict: a duplicated key, which Kubernetes would resolve
			// silently, is a template bug.
			m := map[string]any{}
			if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
				return nil, fmt.Errorf("%s: not valid YAML: %w\n%s", name, err, doc)
			}
			if len(m) == 0 {
				continue // a document of comments only
			}
			objs = append(objs, &unstructured.Unstructured{Object: m})
		}
	}
	return objs, nil
}
