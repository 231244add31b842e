package chart_test

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"

	sandboxchart "github.com/cocoonstack/sandbox-operator/charts/sandbox-operator"
)

// TestValuesFileIsCommented: `helm show values` prints values.yaml as it is,
// so every value must carry a comment line right above it (the entries
// inside a resources block are plain Kubernetes and exempt).
func TestValuesFileIsCommented(t *testing.T) {
	raw, err := fs.ReadFile(sandboxchart.Files, "values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type frame struct {
		indent int
		key    string
	}
	var stack []frame
	prev := ""
	for i, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			prev = trimmed
			continue
		}
		indent := len(line) - len(strings.TrimLeft(line, " "))
		key, _, isKey := strings.Cut(trimmed, ":")
		if strings.HasPrefix(trimmed, "- ") || !isKey {
			prev = trimmed
			continue
		}
		for len(stack) > 0 && stack[len(stack)-1].indent >= indent {
			stack = stack[:len(stack)-1]
		}
		exempt := slices.ContainsFunc(stack, func(f frame) bool { return f.key == "resources" })
		if !exempt && !strings.HasPrefix(prev, "#") {
			t.Errorf("values.yaml:%d: %q has no comment above it", i+1, key)
		}
		stack = append(stack, frame{indent, key})
		prev = trimmed
	}

	// And the chart's values are what `helm show values` prints.
	c := loadChart(t)
	for _, f := range c.Raw {
		if f.Name == "values.yaml" && !bytes.Equal(f.Data, raw) {
			t.Error("the loaded chart's raw values.yaml differs from the file")
		}
	}
}

// TestChartDirectoryLoadsAsEmbedded loads the chart directory the way
// `helm install ./charts/sandbox-operator` does (.helmignore applied) and
// checks it holds exactly the embedded files plus the generated CRD: no Go
// or Bazel file leaks into the chart, and no template is missing from the
// embed patterns in chart.go. It needs the source tree, so it runs under
// `go test` (whose working directory is the package directory) only.
func TestChartDirectoryLoadsAsEmbedded(t *testing.T) {
	if _, err := os.Stat("Chart.yaml"); errors.Is(err, fs.ErrNotExist) {
		t.Skip("the chart directory is not the working directory (sandboxed build); the embedded chart is tested above")
	}
	onDisk, err := loader.Load(".")
	if err != nil {
		t.Fatalf("helm loading the chart directory: %v", err)
	}
	embedded := loadChart(t)
	var got, want []string
	for _, f := range onDisk.Raw {
		// .helmignore steers the directory load; it is not chart content.
		if f.Name != ".helmignore" {
			got = append(got, f.Name)
		}
	}
	for _, f := range embedded.Raw {
		want = append(want, f.Name)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("chart directory files %v, embedded files %v", got, want)
	}
	for _, f := range onDisk.Raw {
		for _, e := range embedded.Raw {
			if e.Name == f.Name && !bytes.Equal(e.Data, f.Data) {
				t.Errorf("%s differs between the directory and the embed", f.Name)
			}
		}
	}
}
