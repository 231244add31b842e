package chart_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
	"github.com/cocoonstack/sandbox-operator/examples"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
	"github.com/cocoonstack/sandbox-operator/tools/chartpkg/chartpack"
)

// The packaged chart and the helm command. Under Bazel both come from the
// build (data + $(rlocationpath)): the archive is //:package's output and
// helm is //tools/helm. Under plain `go test` the archive is packaged here
// from the chart directory at the images' default version (what `go run
// ./tools/chartpkg --chart .` writes) and helm is built from the module.
const (
	envChartPackage = "SANDBOX_OPERATOR_CHART"
	envHelm         = "HELM"
)

// kubeVersion is what `helm template` and `helm lint` assume of the
// cluster: the Kubernetes release go.mod pins. (A helm built without its
// release ldflags would otherwise assume v1.20, which the chart's
// kubeVersion constraint refuses.)
const kubeVersion = "v1.36.3"

// packaged is the archive: its bytes and its path (under go test, its bare
// file name until chartPackage writes it out).
type packaged struct {
	path string
	data []byte
}

var (
	packageOnce = sync.OnceValues(func() (packaged, error) {
		if p, ok, err := runfile(envChartPackage); ok || err != nil {
			if err != nil {
				return packaged{}, err
			}
			data, err := os.ReadFile(p)
			return packaged{p, data}, err
		}
		if _, err := os.Stat("Chart.yaml"); err != nil {
			return packaged{}, errors.New(envChartPackage + " is unset and the chart directory is not the working directory")
		}
		files, err := chartpack.LoadDir(".")
		if err != nil {
			return packaged{}, err
		}
		res, err := chartpack.Package(files, chartpack.DefaultImageVersion, time.Time{})
		if err != nil {
			return packaged{}, err
		}
		// Written to each test's temporary directory by chartPackage.
		return packaged{res.FileName, res.Archive}, nil
	})
	helmOnce = sync.OnceValues(func() (string, error) {
		return testbin.Locate(envHelm, "helm.sh/helm/v3/cmd/helm", "")
	})
)

func chartPackage(t *testing.T) packaged {
	t.Helper()
	p, err := packageOnce()
	if err != nil {
		t.Fatalf("the packaged chart: %v", err)
	}
	if !filepath.IsAbs(p.path) {
		p.path = filepath.Join(t.TempDir(), p.path)
		if err := os.WriteFile(p.path, p.data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	bin, err := helmOnce()
	if err != nil {
		t.Fatalf("helm: %v", err)
	}
	cmd := exec.Command(bin, args...)
	// No user's helm configuration, repositories or plugins.
	home := t.TempDir()
	cmd.Env = append(os.Environ(),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "no-kubeconfig"),
	)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), errors.New(err.Error() + ": " + stderr.String() + stdout.String())
	}
	return stdout.String(), nil
}

// runfile resolves the runfiles location in env (unset: ok is false).
func runfile(env string) (path string, ok bool, err error) {
	p := os.Getenv(env)
	if p == "" {
		return "", false, nil
	}
	if !filepath.IsAbs(p) {
		root := os.Getenv("RUNFILES_DIR")
		if root == "" {
			root = os.Getenv("TEST_SRCDIR")
		}
		if root == "" {
			return "", true, errors.New(env + " is a runfiles location but neither RUNFILES_DIR nor TEST_SRCDIR is set")
		}
		p = filepath.Join(root, p)
	}
	_, err = os.Stat(p)
	return p, true, err
}

// embeddedFiles are the chart's files as the other tests load them: what
// the directory holds through .helmignore, minus .helmignore itself.
func embeddedFiles(t *testing.T) []chartpack.File {
	t.Helper()
	var files []chartpack.File
	err := fs.WalkDir(sandboxchart.Files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(sandboxchart.Files, p)
		files = append(files, chartpack.File{Name: p, Data: data})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return append(files, chartpack.File{Name: sandboxchart.NodeInventoryCRDPath, Data: crds.NodeInventoryYAML})
}

func pack(t *testing.T, imageVersion string) *chartpack.Result {
	t.Helper()
	res, err := chartpack.Package(embeddedFiles(t), imageVersion, time.Time{})
	if err != nil {
		t.Fatalf("packaging at %s: %v", imageVersion, err)
	}
	return res
}

func archiveFiles(t *testing.T, archive []byte) map[string][]byte {
	t.Helper()
	files, err := loader.LoadArchiveFiles(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		out[f.Name] = f.Data
	}
	return out
}

func loadArchive(t *testing.T, archive []byte) *chart.Chart {
	t.Helper()
	c, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func imageTag(t *testing.T, c *chart.Chart, component string) any {
	t.Helper()
	tag, err := chartutil.Values(c.Values).PathValue(component + ".image.tag")
	if err != nil {
		t.Fatalf("%s.image.tag: %v", component, err)
	}
	return tag
}

// TestPackageIsTheStampedSource: the package under test (Bazel's output, or
// the directory packaged here) is named for its version, carries the
// images' version as appVersion and every image tag, and is byte for byte
// what packaging the chart's source files at that version gives, so the
// Bazel rule and `go run ./tools/chartpkg` agree.
func TestPackageIsTheStampedSource(t *testing.T) {
	pkg := chartPackage(t)
	c := loadArchive(t, pkg.data)
	imageVersion := c.Metadata.AppVersion
	version, err := chartpack.ChartVersion(imageVersion)
	if err != nil {
		t.Fatalf("appVersion %q: %v", imageVersion, err)
	}
	if c.Metadata.Version != version {
		t.Errorf("chart version %q, want %q for images at %q", c.Metadata.Version, version, imageVersion)
	}
	if got, want := filepath.Base(pkg.path), "sandbox-operator-"+version+".tgz"; got != want {
		t.Errorf("package named %s, want %s", got, want)
	}
	for _, component := range []string{"apiserver", "envdProxy"} {
		if tag := imageTag(t, c, component); tag != imageVersion {
			t.Errorf("%s.image.tag = %v, want the images' version %q", component, tag, imageVersion)
		}
	}
	res := pack(t, imageVersion)
	if !slices.Equal(res.ImageTags, []string{"apiserver.image.tag", "envdProxy.image.tag"}) {
		t.Errorf("stamped %v", res.ImageTags)
	}
	if !bytes.Equal(res.Archive, pkg.data) {
		got, want := archiveFiles(t, pkg.data), archiveFiles(t, res.Archive)
		for name := range want {
			if !bytes.Equal(got[name], want[name]) {
				t.Errorf("%s differs from the source stamped at %s", name, imageVersion)
			}
		}
		for name := range got {
			if _, ok := want[name]; !ok {
				t.Errorf("the package holds %s, which the chart's source does not", name)
			}
		}
		t.Fatalf("the package is not the chart's source stamped at %s", imageVersion)
	}
}

// TestSourceIsTheChartStampedLatest: the checked-in Chart.yaml and
// values.yaml say what stamping them with "latest" says, so installing from
// the directory and from a package follow one rule.
func TestSourceIsTheChartStampedLatest(t *testing.T) {
	stamped := archiveFiles(t, pack(t, "latest").Archive)
	for _, name := range []string{"Chart.yaml", "values.yaml"} {
		src, err := fs.ReadFile(sandboxchart.Files, name)
		if err != nil {
			t.Fatal(err)
		}
		var a, b any
		if err := yaml.Unmarshal(src, &a); err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(stamped[name], &b); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s differs from itself stamped with latest", name)
		}
	}
}

func TestPackagingIsReproducible(t *testing.T) {
	a, b := pack(t, "v9.8.7"), pack(t, "v9.8.7")
	if !bytes.Equal(a.Archive, b.Archive) {
		t.Fatal("packaging the same files at the same version twice gave different bytes")
	}
	if a.FileName != "sandbox-operator-9.8.7.tgz" {
		t.Errorf("file name %s", a.FileName)
	}
	dev := pack(t, "dev")
	if dev.FileName != "sandbox-operator-0.0.0-dev.tgz" {
		t.Errorf("file name %s at the default version", dev.FileName)
	}
	if bytes.Equal(a.Archive, dev.Archive) {
		t.Fatal("two versions packaged the same bytes")
	}

	// Another version changes Chart.yaml's version and appVersion and the
	// image tags, and nothing else.
	for v, res := range map[string]*chartpack.Result{"v9.8.7": a, "dev": dev} {
		c := loadArchive(t, res.Archive)
		want, _ := chartpack.ChartVersion(v)
		if c.Metadata.Version != want || c.Metadata.AppVersion != v {
			t.Errorf("at %s: version %q appVersion %q", v, c.Metadata.Version, c.Metadata.AppVersion)
		}
		for _, component := range []string{"apiserver", "envdProxy"} {
			if tag := imageTag(t, c, component); tag != v {
				t.Errorf("at %s: %s.image.tag = %v", v, component, tag)
			}
		}
	}
	fa, fd := archiveFiles(t, a.Archive), archiveFiles(t, dev.Archive)
	for name, data := range fa {
		if name == "Chart.yaml" || name == "values.yaml" {
			continue
		}
		if !bytes.Equal(data, fd[name]) {
			t.Errorf("%s differs between versions", name)
		}
	}
	var changed []string
	la, ld := strings.Split(string(fa["values.yaml"]), "\n"), strings.Split(string(fd["values.yaml"]), "\n")
	if len(la) != len(ld) {
		t.Fatal("values.yaml changed its line count with the version")
	}
	for i := range la {
		if la[i] != ld[i] {
			changed = append(changed, strings.TrimSpace(la[i]))
		}
	}
	if !slices.Equal(changed, []string{`tag: "v9.8.7"`, `tag: "v9.8.7"`}) {
		t.Errorf("values.yaml lines that change with the version: %q", changed)
	}
}

func e2bValuesFile(t *testing.T) string {
	t.Helper()
	data, err := fs.ReadFile(examples.Files, examples.E2BValues)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "e2b-values.yaml")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHelmLint lints the package with the helm the build produces, plain
// and --strict (warnings fail), with the default values and the example
// e2b values.
func TestHelmLint(t *testing.T) {
	pkg := chartPackage(t)
	values := e2bValuesFile(t)
	for _, args := range [][]string{
		{"lint", pkg.path},
		{"lint", "--strict", pkg.path},
		{"lint", "--strict", "--kube-version", kubeVersion, pkg.path},
		{"lint", "--strict", "--kube-version", kubeVersion, "-f", values, pkg.path},
	} {
		out, err := helm(t, args...)
		if err != nil {
			t.Errorf("helm %s: %v", strings.Join(args, " "), err)
			continue
		}
		if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
			t.Errorf("helm %s:\n%s", strings.Join(args, " "), out)
		}
	}
}

// TestHelmTemplate renders the package with the helm the build produces:
// the default values give the 18 objects of docs/helm.md, the example e2b
// values the 25 (the 24 of e2b plus the alias ConfigMap), and every container runs the images' version.
func TestHelmTemplate(t *testing.T) {
	pkg := chartPackage(t)
	imageVersion := loadArchive(t, pkg.data).Metadata.AppVersion
	for _, tc := range []struct {
		name string
		args []string
		want []string
	}{
		{"default values", nil, sorted(defaultObjects)},
		{"e2b values", []string{"-f", e2bValuesFile(t)}, sorted(defaultObjects, e2bObjects, []string{"ConfigMap/" + releaseNamespace + "/sandbox-apiserver-e2b-aliases"})},
	} {
		args := append([]string{"template", releaseName, pkg.path,
			"--namespace", releaseNamespace, "--include-crds", "--kube-version", kubeVersion}, tc.args...)
		out, err := helm(t, args...)
		if err != nil {
			t.Errorf("%s: helm %s: %v", tc.name, strings.Join(args, " "), err)
			continue
		}
		objs := parseDocs(t, "helm template", out)
		if got := keys(objs); !slices.Equal(got, tc.want) {
			t.Errorf("%s: helm template rendered\n  %s\nwant\n  %s", tc.name, strings.Join(got, "\n  "), strings.Join(tc.want, "\n  "))
		}
		for _, o := range objs {
			if o.u.GetKind() != "Deployment" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(o.u.Object, "spec", "template", "spec", "containers")
			for _, c := range containers {
				image, _ := c.(map[string]any)["image"].(string)
				if !strings.HasSuffix(image, ":"+imageVersion) {
					t.Errorf("%s: Deployment %s runs %s, want the images' version %s", tc.name, o.u.GetName(), image, imageVersion)
				}
			}
		}
	}
}
