// Package stats holds the few summary statistics the scale measurements
// share, so every phase reports percentiles and medians the same way.
package stats

import (
	"cmp"
	"math"
	"slices"
)

// Percentile is the nearest-rank p-th percentile of sorted: the smallest
// sample that at least p % of the samples do not exceed. It is the zero
// value for no samples.
func Percentile[T cmp.Ordered](sorted []T, p float64) T {
	var zero T
	n := len(sorted)
	if n == 0 {
		return zero
	}
	rank := int(math.Ceil(p / 100 * float64(n)))
	return sorted[min(max(rank, 1), n)-1]
}

// Median of xs, the mean of the middle two for an even count; 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}
