package chartpack

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"
)

func TestChartVersion(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"v1.2.3", "1.2.3"},
		{"1.2.3", "1.2.3"},
		{"v0.0.1", "0.0.1"},
		{"v1.3.0-rc.1", "1.3.0-rc.1"},
		{"v10.20.30-alpha-1.0.beta", "10.20.30-alpha-1.0.beta"},
		{"dev", "0.0.0-dev"},
		{"latest", "0.0.0-latest"},
		{"main", "0.0.0-main"},
		{"sha-0a1b2c3", "0.0.0-sha-0a1b2c3"},
		{"v1.2", "0.0.0-v1.2"},
		{"v01.2.3", "0.0.0-v01.2.3"},
		{"1.2.3.4", "0.0.0-1.2.3.4"},
		{"20240101", "0.0.0-20240101"},
		{"v1.2.3-4-g0a1b2c3", "1.2.3-4-g0a1b2c3"},
	} {
		got, err := ChartVersion(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ChartVersion(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			continue
		}
		// What Helm itself requires of a chart version.
		md := &chart.Metadata{APIVersion: "v2", Name: "x", Version: got}
		if err := md.Validate(); err != nil {
			t.Errorf("ChartVersion(%q) = %q, which Helm refuses: %v", tc.in, got, err)
		}
	}
	for _, in := range []string{
		"",                       // no tag
		"feature_x",              // '_' is a tag character, not a SemVer one
		"v1.2.3+build.5",         // '+' is no tag character
		"-dev",                   // a tag cannot start with '-'
		".dev",                   // nor '.'
		"01",                     // 0.0.0-01: numeric pre-release with a leading zero
		"rc..1",                  // empty identifier
		"dev/x",                  // not a tag
		strings.Repeat("a", 129), // longer than a tag may be
	} {
		if got, err := ChartVersion(in); err == nil {
			t.Errorf("ChartVersion(%q) = %q, want an error", in, got)
		}
	}
}

func TestIsSemVer(t *testing.T) {
	for v, want := range map[string]bool{
		"0.0.0": true, "1.2.3": true, "1.2.3-0": true, "1.2.3-0a": true, "1.2.3-a.0": true,
		"1.2.3+01": true, "1.2.3-rc.1+b.2": true, "1.2.3--": true,
		"1.2": false, "v1.2.3": false, "01.2.3": false, "1.02.3": false, "1.2.3-01": false,
		"1.2.3-": false, "1.2.3+": false, "1.2.3-a..b": false, "1.2.3-ä": false, "": false,
		"1.2.3.4": false, "a.b.c": false,
	} {
		if got := IsSemVer(v); got != want {
			t.Errorf("IsSemVer(%q) = %v, want %v", v, got, want)
		}
	}
}

const testValues = `# top comment
image:
  # the root image
  repository: r0
  tag: latest # trailing comment
# a list of sidecars
sidecars:
  - name: one
    image:
      repository: r1
      tag: "1.0"
  - image:
      tag: '2.0'
      repository: r2
nested:
  deeper:
    image:
      # tag comment
      tag: x
    notImage:
      tag: keep
  tag: keep-too
`

func TestStampValues(t *testing.T) {
	out, paths, err := stampValuesYAML([]byte(testValues), "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	want := strings.NewReplacer(
		"tag: latest # trailing comment", `tag: "v1.2.3" # trailing comment`,
		`tag: "1.0"`, `tag: "v1.2.3"`,
		`tag: '2.0'`, `tag: "v1.2.3"`,
		"tag: x", `tag: "v1.2.3"`,
	).Replace(testValues)
	if string(out) != want {
		t.Errorf("stamped values:\n%s\nwant:\n%s", out, want)
	}
	wantPaths := []string{"image.tag", "sidecars.[].image.tag", "sidecars.[].image.tag", "nested.deeper.image.tag"}
	if !slices.Equal(paths, wantPaths) {
		t.Errorf("stamped %v, want %v", paths, wantPaths)
	}
}

func TestStampValuesRefusesWhatItCannotEdit(t *testing.T) {
	for name, values := range map[string]string{
		"flow mapping":        "image: {repository: r, tag: t}\n",
		"tag on the key line": "image:\n  repository: r\n  tag:\n    latest\n",
	} {
		if _, _, err := stampValuesYAML([]byte(values), "v1"); err == nil {
			t.Errorf("%s: stamped without error", name)
		}
	}
	// A file without any image is left as it is.
	in := "replicas: 2\n"
	out, paths, err := stampValuesYAML([]byte(in), "v1")
	if err != nil || string(out) != in || len(paths) != 0 {
		t.Errorf("no image: %q %v %v", out, paths, err)
	}
}

func TestStampChartYAML(t *testing.T) {
	in := "apiVersion: v2\nname: c\n# version comment\nversion: 0.1.0 # old\nappVersion: latest\ndescription: >-\n  version: not this\n"
	out, err := stampChartYAML([]byte(in), "1.2.3", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	want := "apiVersion: v2\nname: c\n# version comment\nversion: 1.2.3\nappVersion: \"v1.2.3\"\ndescription: >-\n  version: not this\n"
	if string(out) != want {
		t.Errorf("stamped:\n%s\nwant:\n%s", out, want)
	}

	out, err = stampChartYAML([]byte("apiVersion: v2\nname: c\nversion: 0.1.0\n"), "1.2.3", "v1.2.3")
	if err != nil || string(out) != "apiVersion: v2\nname: c\nversion: 1.2.3\nappVersion: \"v1.2.3\"\n" {
		t.Errorf("without appVersion: %q, %v", out, err)
	}
	for name, in := range map[string]string{
		"no version":   "apiVersion: v2\nname: c\n",
		"twice":        "apiVersion: v2\nname: c\nversion: 1.0.0\nversion: 1.0.0\n",
		"flow mapping": "{apiVersion: v2, name: c, version: 1.0.0}\n",
	} {
		if _, err := stampChartYAML([]byte(in), "1.2.3", "v1.2.3"); err == nil {
			t.Errorf("%s: stamped without error", name)
		}
	}
}

// writeChart writes a small chart directory: Chart.yaml, values.yaml with
// one image, a template, a CRD, a file .helmignore drops, the .helmignore.
func writeChart(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range map[string]string{
		"Chart.yaml":            "apiVersion: v2\nname: demo\nversion: 0.0.0-latest\nappVersion: \"latest\"\n",
		"values.yaml":           "# the image\nimage:\n  # its tag\n  tag: latest\n",
		"templates/cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\ndata:\n  image: {{ .Values.image.tag | quote }}\n",
		"crds/demo.yaml":        "# a CRD would be here\n",
		"chart.go":              "package chart\n",
		"templates/BUILD.bazel": "# bazel\n",
		".helmignore":           "*.go\nBUILD.bazel\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestLoadDirAndLoadFilesAgree(t *testing.T) {
	dir := writeChart(t)
	files, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Name)
	}
	want := []string{"Chart.yaml", "crds/demo.yaml", "templates/cm.yaml", "values.yaml"}
	if !slices.Equal(names, want) {
		t.Fatalf("loaded %v, want %v (.helmignore applied, and itself left out)", names, want)
	}

	// The same files named one by one, as the Bazel rule passes them (the
	// ignored ones included: .helmignore still applies).
	paths := map[string]string{}
	for _, n := range append(want, "chart.go", "templates/BUILD.bazel", ".helmignore") {
		paths[n] = filepath.Join(dir, filepath.FromSlash(n))
	}
	byName, err := LoadFiles(paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(byName) != len(files) {
		t.Fatalf("LoadFiles gave %d files, LoadDir %d", len(byName), len(files))
	}
	for i := range files {
		if byName[i].Name != files[i].Name || !bytes.Equal(byName[i].Data, files[i].Data) {
			t.Errorf("file %d: LoadFiles %s, LoadDir %s", i, byName[i].Name, files[i].Name)
		}
	}
	if _, err := LoadFiles(map[string]string{"../x": paths["Chart.yaml"]}); err == nil {
		t.Error("LoadFiles accepted a name outside the chart")
	}
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

func readArchive(t *testing.T, archive []byte) (gzip.Header, []entry) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	var entries []entry
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		entries = append(entries, entry{hdr, data})
	}
	return zr.Header, entries
}

func TestPackage(t *testing.T) {
	files, err := LoadDir(writeChart(t))
	if err != nil {
		t.Fatal(err)
	}
	res, err := Package(files, "v1.2.3", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if res.FileName != "demo-1.2.3.tgz" {
		t.Errorf("file name %s, want demo-1.2.3.tgz", res.FileName)
	}
	if res.Metadata.Version != "1.2.3" || res.Metadata.AppVersion != "v1.2.3" {
		t.Errorf("metadata version %q appVersion %q", res.Metadata.Version, res.Metadata.AppVersion)
	}
	if !slices.Equal(res.ImageTags, []string{"image.tag"}) {
		t.Errorf("stamped %v", res.ImageTags)
	}

	zh, entries := readArchive(t, res.Archive)
	if zh.Name != "" || zh.Comment != "" || !zh.ModTime.IsZero() || zh.Extra != nil || zh.OS != 255 {
		t.Errorf("gzip header %+v, want no name, comment, extra or time, OS unknown", zh)
	}
	var names []string
	for _, e := range entries {
		h := e.hdr
		names = append(names, h.Name)
		if h.Typeflag != tar.TypeReg || h.Mode != 0o644 || h.Uid != 0 || h.Gid != 0 ||
			h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(time.Unix(0, 0)) || h.Format != tar.FormatUSTAR {
			t.Errorf("entry %s: type %c mode %o owner %d:%d (%q:%q) mtime %v format %v", h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Uname, h.Gname, h.ModTime, h.Format)
		}
	}
	wantNames := []string{"demo/Chart.yaml", "demo/crds/demo.yaml", "demo/templates/cm.yaml", "demo/values.yaml"}
	if !slices.Equal(names, wantNames) {
		t.Errorf("entries %v, want %v", names, wantNames)
	}

	c, err := loader.LoadArchive(bytes.NewReader(res.Archive))
	if err != nil {
		t.Fatal(err)
	}
	if c.Metadata.Version != "1.2.3" || c.Metadata.AppVersion != "v1.2.3" || c.Values["image"].(map[string]any)["tag"] != "v1.2.3" {
		t.Errorf("archive loads as version %q appVersion %q values %v", c.Metadata.Version, c.Metadata.AppVersion, c.Values)
	}
	// The comments survive the stamp.
	for _, f := range c.Raw {
		if f.Name == "values.yaml" && string(f.Data) != "# the image\nimage:\n  # its tag\n  tag: \"v1.2.3\"\n" {
			t.Errorf("stamped values.yaml:\n%s", f.Data)
		}
	}
}

func TestPackageIsReproducible(t *testing.T) {
	files, err := LoadDir(writeChart(t))
	if err != nil {
		t.Fatal(err)
	}
	a, err := Package(files, "dev", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	// Reloaded from a fresh copy, in another order.
	again, err := LoadDir(writeChart(t))
	if err != nil {
		t.Fatal(err)
	}
	slices.Reverse(again)
	b, err := Package(again, "dev", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Archive, b.Archive) || a.FileName != "demo-0.0.0-dev.tgz" {
		t.Fatalf("two packagings differ (%s, %s)", a.FileName, b.FileName)
	}
	// The epoch is what the zero time means.
	c, err := Package(files, "dev", time.Unix(0, 0))
	if err != nil || !bytes.Equal(a.Archive, c.Archive) {
		t.Fatalf("an explicit epoch differs from the default: %v", err)
	}

	other, err := Package(files, "v2.0.0", time.Time{})
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Archive, other.Archive) {
		t.Fatal("another version packages the same bytes")
	}
	later, err := Package(files, "dev", time.Unix(1700000000, 0))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(a.Archive, later.Archive) {
		t.Fatal("another mtime packages the same bytes")
	}
	_, entries := readArchive(t, later.Archive)
	if !entries[0].hdr.ModTime.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("mtime %v", entries[0].hdr.ModTime)
	}
}

func TestPackageRefuses(t *testing.T) {
	files, err := LoadDir(writeChart(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Package(files, "feature_x", time.Time{}); err == nil {
		t.Error("packaged an image version with no SemVer form")
	}
	if _, err := Package(append(files, files[0]), "dev", time.Time{}); err == nil {
		t.Error("packaged a file given twice")
	}
	var broken []File
	for _, f := range files {
		if f.Name == "Chart.yaml" {
			f.Data = []byte("apiVersion: v2\nversion: 1.0.0\n") // no name
		}
		broken = append(broken, f)
	}
	if _, err := Package(broken, "dev", time.Time{}); err == nil {
		t.Error("packaged a chart without a name")
	}
}

// TestSetImageTags covers the walk the values proof relies on.
func TestSetImageTags(t *testing.T) {
	var v any
	if err := yaml.Unmarshal([]byte(testValues), &v); err != nil {
		t.Fatal(err)
	}
	if n := setImageTags(v, "x"); n != 4 {
		t.Errorf("set %d image tags, want 4", n)
	}
}
