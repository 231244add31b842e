package chart_test

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"helm.sh/helm/v3/pkg/strvals"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
)

// releaseNamespace is where the tests install; it is deliberately not a
// namespace any template could hard-code.
const (
	releaseName      = "so-test"
	releaseNamespace = "sandbox-system-test"
)

func loadChart(t *testing.T) *chart.Chart {
	t.Helper()
	c, err := sandboxchart.Load()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// object is one rendered Kubernetes object and the template it came from.
type object struct {
	source string
	u      *unstructured.Unstructured
	raw    string
}

func (o object) key() string {
	return fmt.Sprintf("%s/%s/%s", o.u.GetKind(), o.u.GetNamespace(), o.u.GetName())
}

// render renders the chart as `helm template --include-crds` would with the
// given --set expressions, in strict mode (a reference to a value the chart
// does not define is an error), and returns every object, CRDs first.
func render(t *testing.T, sets ...string) ([]object, error) {
	t.Helper()
	c := loadChart(t)
	vals := map[string]any{}
	for _, s := range sets {
		if err := strvals.ParseInto(s, vals); err != nil {
			t.Fatalf("--set %s: %v", s, err)
		}
	}
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: releaseName, Namespace: releaseNamespace, IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatalf("building render values: %v", err)
	}
	out, err := engine.Engine{Strict: true}.Render(c, rv)
	if err != nil {
		return nil, err
	}

	var objs []object
	for _, crd := range c.CRDObjects() {
		objs = append(objs, parseDocs(t, crd.Filename, string(crd.File.Data))...)
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if strings.HasSuffix(name, "NOTES.txt") {
			continue
		}
		objs = append(objs, parseDocs(t, name, out[name])...)
	}
	return objs, nil
}

// mustRender is render for value sets that must succeed.
func mustRender(t *testing.T, sets ...string) []object {
	t.Helper()
	objs, err := render(t, sets...)
	if err != nil {
		t.Fatalf("render %v: %v", sets, err)
	}
	return objs
}

// parseDocs splits one rendered file into its YAML documents and parses each
// one; every document must be an object with apiVersion, kind and a name.
func parseDocs(t *testing.T, source, content string) []object {
	t.Helper()
	var objs []object
	for _, doc := range releaseutil.SplitManifests(content) {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		m := map[string]any{}
		if err := yaml.UnmarshalStrict([]byte(doc), &m); err != nil {
			t.Fatalf("%s: not valid YAML: %v\n%s", source, err, doc)
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
			t.Fatalf("%s: object without apiVersion, kind or metadata.name:\n%s", source, doc)
		}
		objs = append(objs, object{source: source, u: u, raw: doc})
	}
	return objs
}

func stripComments(doc string) string {
	var b strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

func keys(objs []object) []string {
	ks := make([]string, 0, len(objs))
	for _, o := range objs {
		ks = append(ks, o.key())
	}
	sort.Strings(ks)
	return ks
}

func find(t *testing.T, objs []object, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.u.GetKind() == kind && o.u.GetName() == name {
			return o.u
		}
	}
	t.Fatalf("no %s %q rendered; have %v", kind, name, keys(objs))
	return nil
}

func has(objs []object, kind, name string) bool {
	for _, o := range objs {
		if o.u.GetKind() == kind && o.u.GetName() == name {
			return true
		}
	}
	return false
}

// e2bSets are the values the configuration reference enables e2b with.
var e2bSets = []string{
	"apiserver.e2b.enabled=true",
	"apiserver.e2b.domain=sandbox.example.com",
	"apiserver.e2b.apiKeySecret.name=e2b-api-keys",
	"apiserver.e2b.envdSecret.secretName=e2b-envd-secret",
	"apiserver.sandboxdToken.secretName=sandboxd-token",
}

func with(base []string, more ...string) []string {
	return append(append([]string(nil), base...), more...)
}
