// Package chart embeds the sandbox-operator Helm chart's own files (Chart.yaml,
// values.yaml and templates/) so its tests render the chart
// from the same bytes under `go test` and under Bazel, where the directory
// is not on disk next to the test.
//
// The chart's CRDs live in the crds subpackage (a Bazel package of its own)
// and are embedded there as crds.NodeInventoryYAML.
//
// Helm ignores this file: .helmignore drops *.go and BUILD files.
package chart

import "embed"

// Files holds the chart's files at their paths relative to the chart root.
//
//go:embed Chart.yaml values.yaml templates/*.yaml templates/*.tpl templates/NOTES.txt
var Files embed.FS
