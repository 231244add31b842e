// Package prometheusoperatorcrds embeds, for tests, prometheus-operator's CRD
// manifests for the kinds the chart's monitoring values render
// (ServiceMonitor and PrometheusRule), so a test can install them in its own
// API server. tools/prometheus-operator-crds.sh copies them from the
// example/prometheus-operator-crd directory of the Go module
// github.com/prometheus-operator/prometheus-operator at the version VERSION
// names; the module's LICENSE and NOTICE apply to them. Nothing here ships
// with the chart.
package prometheusoperatorcrds

import (
	"embed"
	"io/fs"
	"strings"
)

//go:embed *.yaml
var manifests embed.FS

//go:embed VERSION
var version string

// Version is the module and version the manifests come from, and the
// module's go.sum hash, e.g.
// "github.com/prometheus-operator/prometheus-operator v0.85.0 h1:...".
func Version() string { return strings.TrimSpace(version) }

// Manifests returns the embedded CRD manifests, ordered by file name.
func Manifests() [][]byte {
	names, err := fs.Glob(manifests, "*.yaml")
	if err != nil {
		panic(err) // a constant, valid pattern
	}
	out := make([][]byte, 0, len(names))
	for _, name := range names {
		data, err := manifests.ReadFile(name)
		if err != nil {
			panic(err) // an embedded file always reads
		}
		out = append(out, data)
	}
	return out
}
