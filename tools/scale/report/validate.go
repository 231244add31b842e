package report

import (
	"errors"
	"fmt"
	"math"
)

// The causes a chart refuses to render. They are wrapped with the chart,
// series and value position, so the message says where the bad input is and
// errors.Is still identifies the cause.
var (
	errNoSeries       = errors.New("no series to plot")
	errNoPoints       = errors.New("no data points in any series")
	errNoCategories   = errors.New("no categories")
	errLengthMismatch = errors.New("length mismatch")
	errNotFinite      = errors.New("value is NaN or infinite")
	errNotPositive    = errors.New("value on a log axis must be > 0")
	errRangeTooWide   = errors.New("value range cannot be drawn")
	errNilChart       = errors.New("nil chart")
)

// checkValue rejects a value the axis cannot place: NaN and ±Inf have no
// position, and a log axis has no position for zero or negative values.
func checkValue(v float64, logScale bool) error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%w: %v", errNotFinite, v)
	}
	if logScale && v <= 0 {
		return fmt.Errorf("%w: %v", errNotPositive, v)
	}
	return nil
}

// checkValues applies checkValue to every element and names the index of the
// first bad one.
func checkValues(values []float64, logScale bool) error {
	for i, v := range values {
		if err := checkValue(v, logScale); err != nil {
			return fmt.Errorf("value %d: %w", i, err)
		}
	}
	return nil
}

// seriesName is the legend text of series i; an unnamed series still gets a
// legend entry so every colour on the plot is explained.
func seriesName(name string, i int) string {
	if name == "" {
		return fmt.Sprintf("series %d", i+1)
	}
	return name
}
