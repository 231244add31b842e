// Package chart embeds the sandbox-operator Helm chart's own files (Chart.yaml,
// values.yaml, templates/, and the files the monitoring templates read:
// files/alerts.yaml and dashboards/*.json) so its tests render the chart
// from the same bytes under `go test` and under Bazel, where the directory
// is not on disk next to the test.
//
// The chart's CRDs live in the crds subpackage (a Bazel package of its own)
// and are embedded there as crds.NodeInventoryYAML.
//
// Helm ignores this file: .helmignore drops *.go and BUILD files.
package chart

import (
	"embed"
	"fmt"
	"io/fs"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/cocoonstack/sandbox-operator/charts/sandbox-operator/crds"
)

// NodeInventoryCRDPath is where Helm finds the generated CRD in the chart.
const NodeInventoryCRDPath = "crds/sandbox.cocoonstack.io_nodeinventories.yaml"

// Paths, relative to the chart root, of the monitoring sources other
// packages read: the alert rules (a template of a Prometheus rules file,
// rendered into the PrometheusRule) and the Grafana dashboard.
const (
	AlertsPath    = "files/alerts.yaml"
	DashboardPath = "dashboards/sandbox-operator.json"
)

// Files holds the chart's files at their paths relative to the chart root.
//
//go:embed Chart.yaml values.yaml templates/*.yaml templates/*.tpl templates/NOTES.txt files/*.yaml dashboards/*.json
var Files embed.FS

// Load builds the chart from the embedded files exactly as Helm's loader
// builds it from the directory: templates and values from Files, the CRD
// from package crds (the file tools/codegen.sh generates).
func Load() (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(Files, path)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: path, Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded chart: %w", err)
	}
	files = append(files, &loader.BufferedFile{Name: NodeInventoryCRDPath, Data: crds.NodeInventoryYAML})
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the chart: %w", err)
	}
	return c, nil
}
