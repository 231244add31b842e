package examples_test

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"io/fs"
	"slices"
	"sort"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
	extv1beta1 "sigs.k8s.io/agent-sandbox/extensions/api/v1beta1"
	"sigs.k8s.io/yaml"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/examples"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// decoder decodes only the upstream agent-sandbox kinds, strictly: an
// unknown or duplicated field, or any other kind, is an error.
func decoder(t *testing.T) runtime.Decoder {
	t.Helper()
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{agentsv1beta1.AddToScheme, extv1beta1.AddToScheme} {
		if err := add(s); err != nil {
			t.Fatal(err)
		}
	}
	return serializer.NewCodecFactory(s, serializer.EnableStrict).UniversalDeserializer()
}

// documents splits a YAML stream, dropping documents that hold only
// comments.
func documents(t *testing.T, name string, data []byte) [][]byte {
	t.Helper()
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var docs [][]byte
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var probe any
		if err := yaml.Unmarshal(doc, &probe); err != nil {
			t.Fatalf("%s: not YAML: %v", name, err)
		}
		if probe != nil {
			docs = append(docs, doc)
		}
	}
}

// decodeAll decodes every manifest example into the upstream Go types.
func decodeAll(t *testing.T) []runtime.Object {
	t.Helper()
	dec := decoder(t)
	var objs []runtime.Object
	for _, name := range examples.Manifests {
		data, err := fs.ReadFile(examples.Files, name)
		if err != nil {
			t.Fatal(err)
		}
		docs := documents(t, name, data)
		if len(docs) == 0 {
			t.Fatalf("%s holds no object", name)
		}
		for i, doc := range docs {
			obj, gvk, err := dec.Decode(doc, nil, nil)
			if err != nil {
				t.Fatalf("%s, document %d: %v", name, i+1, err)
			}
			if gvk.Version != "v1beta1" {
				t.Errorf("%s: %s is not the v1beta1 API the cluster serves", name, gvk)
			}
			objs = append(objs, obj)
		}
	}
	return objs
}

// TestEveryFileIsCovered: every YAML file among the examples is either a
// manifest decoded below or the e2b values file.
func TestEveryFileIsCovered(t *testing.T) {
	err := fs.WalkDir(examples.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		if p != examples.E2BValues && !slices.Contains(examples.Manifests, p) {
			t.Errorf("example %s is neither a listed manifest nor the values file", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestManifestsDecodeStrictly(t *testing.T) {
	var kinds []string
	for _, o := range decodeAll(t) {
		kinds = append(kinds, o.GetObjectKind().GroupVersionKind().Kind)
	}
	if want := []string{"SandboxTemplate", "SandboxWarmPool", "Sandbox", "SandboxTemplate", "SandboxWarmPool", "SandboxTemplate", "SandboxWarmPool",
		"SandboxTemplate", "SandboxWarmPool", "SandboxTemplate", "SandboxWarmPool"}; !slices.Equal(kinds, want) {
		t.Fatalf("examples hold %v, want %v", kinds, want)
	}
}

// TestDecoderIsStrict: the decoder above refuses what a typo produces, so
// the examples passing it means something.
func TestDecoderIsStrict(t *testing.T) {
	dec := decoder(t)
	for name, doc := range map[string]string{
		"unknown field":  "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {name: a}\nspec: {podTemplat: {}}\n",
		"duplicate":      "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata: {name: a, name: b}\n",
		"other kind":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		"wrong version":  "apiVersion: agents.x-k8s.io/v1alpha9\nkind: Sandbox\nmetadata: {name: a}\n",
		"unknown nested": "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\nmetadata: {name: a}\nspec: {sandboxTemplateRef: {name: x, nmae: y}}\n",
	} {
		if _, _, err := dec.Decode([]byte(doc), nil, nil); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// TestSandboxClaimsFromTheWarmedPool: the pool the warm-pool driver fills
// for the example pool's template is the pool the example Sandbox claims
// from, resolved by the one rule both use.
func TestSandboxClaimsFromTheWarmedPool(t *testing.T) {
	templates := map[string]*extv1beta1.SandboxTemplate{}
	var (
		pools []*extv1beta1.SandboxWarmPool
		sbs   []*agentsv1beta1.Sandbox
	)
	for _, o := range decodeAll(t) {
		switch o := o.(type) {
		case *extv1beta1.SandboxTemplate:
			templates[o.Namespace+"/"+o.Name] = o
		case *extv1beta1.SandboxWarmPool:
			pools = append(pools, o)
		case *agentsv1beta1.Sandbox:
			sbs = append(sbs, o)
		}
	}
	// The L3 pool is the first; the other four (examples/e2b) serve the
	// e2b SDK's alias and the code interpreter's, each on both lanes, and
	// no Sandbox example.
	if len(pools) != 5 || len(sbs) != 1 {
		t.Fatalf("want five SandboxWarmPools and one Sandbox, have %d and %d", len(pools), len(sbs))
	}
	// A create with internet access claims from the egress lane, one
	// without (the only kind that can pause) from the isolated lane: each
	// e2b example fills both for its one image.
	lanes := map[string]map[string]string{} // image → lane → "image size"
	for _, p := range pools[1:] {
		tpl, ok := templates[p.Namespace+"/"+p.Spec.TemplateRef.Name]
		if !ok {
			t.Fatalf("SandboxWarmPool %s names template %q, which no example defines", p.Name, p.Spec.TemplateRef.Name)
		}
		key, ok := sandbox.PoolKeyOf(tpl.Annotations, firstImage(tpl.Spec.PodTemplate.Spec.Containers))
		if !ok {
			t.Fatalf("SandboxTemplate %s names no pool template", tpl.Name)
		}
		if lanes[key.Template] == nil {
			lanes[key.Template] = map[string]string{}
		}
		lanes[key.Template][key.Net] = key.Template + " " + key.Size
	}
	if len(lanes) != 2 {
		t.Errorf("the e2b example pools serve %d images, want the base alias's and the code interpreter's", len(lanes))
	}
	for image, l := range lanes {
		if l["egress"] == "" || l["egress"] != l["none"] {
			t.Errorf("the e2b example pools of %s cover %v; want the same image and size on the egress and the none lane", image, l)
		}
	}
	wp, sb := pools[0], sbs[0]

	// The driver looks the template up in the pool's own namespace; the
	// examples set none, so both land where they are applied.
	tpl, ok := templates[wp.Namespace+"/"+wp.Spec.TemplateRef.Name]
	if !ok {
		t.Fatalf("SandboxWarmPool %s names template %q, which no example defines in its namespace", wp.Name, wp.Spec.TemplateRef.Name)
	}
	for _, ns := range []string{wp.Namespace, tpl.Namespace, sb.Namespace} {
		if ns != "" {
			t.Errorf("an example sets namespace %q; they are meant for the namespace they are applied to", ns)
		}
	}
	if wp.Spec.Replicas == nil || *wp.Spec.Replicas < 1 {
		t.Errorf("SandboxWarmPool %s asks for no warm capacity", wp.Name)
	}
	want, ok := sandbox.PoolKeyOf(tpl.Annotations, firstImage(tpl.Spec.PodTemplate.Spec.Containers))
	if !ok {
		t.Fatalf("SandboxTemplate %s names no pool template", tpl.Name)
	}
	got, ok := sandbox.PoolKeyOf(sb.Annotations, firstImage(sb.Spec.PodTemplate.Spec.Containers))
	if !ok {
		t.Fatalf("Sandbox %s names no pool template", sb.Name)
	}
	if got != want {
		t.Fatalf("Sandbox %s claims from pool %+v, the warm pool fills %+v", sb.Name, got, want)
	}

	// What sandbox-apiserver checks on create, in the namespace kubectl
	// fills in.
	meta := sb.ObjectMeta.DeepCopy()
	meta.Namespace = "default"
	errs := apimachineryvalidation.ValidateObjectMeta(meta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if len(meta.Finalizers) > 0 {
		errs = append(errs, field.Forbidden(field.NewPath("metadata", "finalizers"), "refused by sandbox-apiserver"))
	}
	if len(errs) > 0 {
		t.Fatalf("Sandbox %s would be refused: %v", sb.Name, errs.ToAggregate())
	}
}

// TestE2BValuesRender: the e2b values file names only values the chart has
// (Helm itself ignores a misspelt key), sets the five that go together, and
// renders the e2b objects in strict mode.
func TestE2BValuesRender(t *testing.T) {
	raw, err := fs.ReadFile(examples.Files, examples.E2BValues)
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.UnmarshalStrict(raw, &vals); err != nil {
		t.Fatalf("%s: %v", examples.E2BValues, err)
	}
	chartRaw, err := fs.ReadFile(sandboxchart.Files, "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var defaults map[string]any
	if err := yaml.Unmarshal(chartRaw, &defaults); err != nil {
		t.Fatal(err)
	}
	for _, p := range leafPaths("", vals) {
		if !hasPath(defaults, p) {
			t.Errorf("%s sets %s, which the chart's values.yaml does not define", examples.E2BValues, p)
		}
	}
	for p, want := range map[string]any{
		"apiserver.e2b.enabled":               true,
		"apiserver.e2b.domain":                "sandbox.example.com",
		"apiserver.e2b.apiKeySecret.name":     "e2b-api-keys",
		"apiserver.e2b.envdSecret.secretName": "e2b-envd-secret",
		"apiserver.sandboxdToken.secretName":  "sandboxd-token",
	} {
		if got := lookup(vals, p); got != want {
			t.Errorf("%s: %s = %v, want %v", examples.E2BValues, p, got, want)
		}
	}

	names := render(t, vals)
	for _, want := range []string{
		"Deployment/sandbox-apiserver",
		"Service/sandbox-apiserver-e2b",
		"Deployment/sandbox-envd-proxy",
		"Service/sandbox-envd-proxy",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("the e2b values render no %s; rendered %v", want, names)
		}
	}
	// The 24 docs/helm.md lists for e2b, plus the alias ConfigMap the
	// values' templateAliases add.
	if len(names) != 25 || !slices.Contains(names, "ConfigMap/sandbox-apiserver-e2b-aliases") {
		t.Errorf("the e2b values render %d objects, want the 24 docs/helm.md lists and the alias ConfigMap: %v", len(names), names)
	}
}

// render renders the chart (CRDs included) with vals as Helm's engine does
// for `helm template`, in strict mode, and returns kind/name of every
// object.
func render(t *testing.T, vals map[string]any) []string {
	t.Helper()
	var files []*loader.BufferedFile
	err := fs.WalkDir(sandboxchart.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(sandboxchart.Files, p)
		files = append(files, &loader.BufferedFile{Name: p, Data: data})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, &loader.BufferedFile{Name: "crds/sandbox.cocoonstack.io_nodeinventories.yaml", Data: crds.NodeInventoryYAML})
	c, err := loader.LoadFiles(files)
	if err != nil {
		t.Fatal(err)
	}
	rv, err := chartutil.ToRenderValues(c, vals, chartutil.ReleaseOptions{
		Name: "sandbox-operator", Namespace: "sandbox-system", IsInstall: true,
	}, chartutil.DefaultCapabilities)
	if err != nil {
		t.Fatal(err)
	}
	out, err := engine.Engine{Strict: true}.Render(c, rv)
	if err != nil {
		t.Fatalf("render with %s: %v", examples.E2BValues, err)
	}
	var names []string
	add := func(content string) {
		for _, doc := range releaseutil.SplitManifests(content) {
			var m struct {
				Kind     string `json:"kind"`
				Metadata struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("rendered YAML: %v\n%s", err, doc)
			}
			if m.Kind != "" {
				names = append(names, m.Kind+"/"+m.Metadata.Name)
			}
		}
	}
	for _, crd := range c.CRDObjects() {
		add(string(crd.File.Data))
	}
	for name, content := range out {
		if !strings.HasSuffix(name, "NOTES.txt") {
			add(content)
		}
	}
	sort.Strings(names)
	return names
}

func leafPaths(prefix string, v any) []string {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		return []string{prefix}
	}
	var out []string
	for k, child := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		out = append(out, leafPaths(p, child)...)
	}
	sort.Strings(out)
	return out
}

func lookup(m map[string]any, path string) any {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = mm[k]
	}
	return cur
}

func hasPath(m map[string]any, path string) bool {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return false
		}
		if cur, ok = mm[k]; !ok {
			return false
		}
	}
	return true
}

func firstImage(containers []corev1.Container) string {
	if len(containers) == 0 {
		return ""
	}
	return containers[0].Image
}
