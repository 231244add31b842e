// Package report writes the result page of a scale benchmark: a Markdown
// document (Page) and the SVG plots it links to (LineChart, BarChart).
//
// It depends only on the standard library so the benchmark harness can
// render reports anywhere it runs, without a plotting toolchain. The SVG it
// emits is a standalone XML document that GitHub and browsers display
// directly, and rendering is deterministic (same input, same bytes) so a
// re-run that measured the same numbers produces no diff.
//
// Charts validate their input and return an error instead of drawing a
// misleading plot: NaN or infinite values, mismatched lengths, empty data
// and non-positive values on a log axis are all rejected.
package report
