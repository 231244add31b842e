package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

const (
	// maxLinearIntervals bounds the number of tick intervals on a linear
	// axis. With 1-2-5 steps the chosen step yields between a third of this
	// and this many intervals, plus at most one at each rounded end.
	maxLinearIntervals = 8
	// maxLogTicks bounds the ticks on a log axis; wider ranges tick every
	// second, third, ... decade instead of crowding the labels.
	maxLogTicks = 10
	// maxTicks guards against float precision producing runaway tick loops
	// when the range is tiny compared to the magnitude of its values.
	maxTicks = 64
)

// axis maps data values along one chart dimension onto [0, 1] and knows
// where its ticks go and how to label them.
type axis struct {
	log    bool
	lo, hi float64   // domain ends in data units; for log axes powers of 10
	ticks  []float64 // tick values in data units, ascending
	step   float64   // linear tick spacing; sets the label precision
}

// newAxis builds a linear or base-10 log axis covering [lo, hi].
func newAxis(logScale bool, lo, hi float64) (axis, error) {
	if lo > hi {
		lo, hi = hi, lo
	}
	if logScale {
		return newLogAxis(lo, hi)
	}
	return newLinearAxis(lo, hi)
}

// newLinearAxis widens [lo, hi] to whole multiples of a 1-2-5 step, so
// every tick label is a round number and the data never touches a
// fractional edge.
func newLinearAxis(lo, hi float64) (axis, error) {
	magnitude := math.Max(math.Abs(lo), math.Abs(hi))
	if hi-lo <= magnitude*1e-9 {
		// A flat range has no span to divide into ticks; open it up
		// around the value so the line sits mid-plot.
		if magnitude == 0 {
			lo, hi = 0, 1
		} else {
			lo, hi = lo-magnitude*0.1, hi+magnitude*0.1
		}
	}
	span := hi - lo
	if math.IsInf(span, 0) {
		return axis{}, fmt.Errorf("%w: [%g, %g] is wider than float64 holds", errRangeTooWide, lo, hi)
	}
	step := niceStep(span / maxLinearIntervals)
	first := math.Floor(lo / step)
	last := math.Ceil(hi / step)
	n := last - first
	if math.IsNaN(n) || math.IsInf(n, 0) || n > maxTicks {
		return axis{}, fmt.Errorf("%w: [%g, %g]", errRangeTooWide, lo, hi)
	}
	ticks := make([]float64, 0, int(n)+1)
	for i := 0; i <= int(n); i++ {
		// Multiplying an integer by the step (rather than adding the
		// step repeatedly) keeps rounding error from accumulating and
		// makes the zero tick exactly zero.
		ticks = append(ticks, (first+float64(i))*step)
	}
	return axis{
		lo:    math.Min(lo, ticks[0]),
		hi:    math.Max(hi, ticks[len(ticks)-1]),
		ticks: ticks,
		step:  step,
	}, nil
}

// niceStep returns the smallest step of the form 1, 2 or 5 × 10^k that is
// at least raw.
func niceStep(raw float64) float64 {
	mag := math.Pow10(floorLog10(raw))
	for _, m := range []float64{1, 2, 5} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

// newLogAxis widens [lo, hi] (both > 0) to whole decades and ticks at
// powers of ten.
func newLogAxis(lo, hi float64) (axis, error) {
	first := floorLog10(lo)
	last := ceilLog10(hi)
	if last == first {
		// lo == hi == a power of ten: show the decade above it.
		last++
	}
	// Tick every stride-th decade so a wide range stays legible, and
	// round the top up to a stride multiple so it carries a tick.
	stride := (last - first + maxLogTicks - 2) / (maxLogTicks - 1)
	last = first + (last-first+stride-1)/stride*stride
	if first < -307 || last > 308 {
		return axis{}, fmt.Errorf("%w: [%g, %g] reaches beyond normal float64 powers of ten", errRangeTooWide, lo, hi)
	}
	var ticks []float64
	for e := first; e <= last; e += stride {
		ticks = append(ticks, math.Pow10(e))
	}
	return axis{log: true, lo: math.Pow10(first), hi: math.Pow10(last), ticks: ticks}, nil
}

// floorLog10 returns floor(log10(v)) for v > 0. math.Log10 is not exact at
// powers of ten (log10(1000) is just under 3), so the estimate is corrected
// against math.Pow10, which is.
func floorLog10(v float64) int {
	e := int(math.Floor(math.Log10(v)))
	for math.Pow10(e) > v {
		e--
	}
	for math.Pow10(e+1) <= v {
		e++
	}
	return e
}

// ceilLog10 returns ceil(log10(v)) for v > 0.
func ceilLog10(v float64) int {
	e := floorLog10(v)
	if math.Pow10(e) < v {
		e++
	}
	return e
}

// frac returns where v lies between the axis ends: 0 at lo, 1 at hi.
func (a axis) frac(v float64) float64 {
	if a.log {
		lo := math.Log10(a.lo)
		return (math.Log10(v) - lo) / (math.Log10(a.hi) - lo)
	}
	return (v - a.lo) / (a.hi - a.lo)
}

// labels returns the text of every tick, in tick order.
func (a axis) labels() []string {
	out := make([]string, len(a.ticks))
	for i, t := range a.ticks {
		step := a.step
		if a.log {
			// Each power of ten needs exactly its own precision.
			step = t
		}
		out[i] = formatTick(t, step)
	}
	return out
}

// siUnits are the suffixes of compact labels, largest first. "G" rather
// than "B" because billion is ambiguous across languages.
var siUnits = []struct {
	size   float64
	suffix string
}{
	{1e12, "T"},
	{1e9, "G"},
	{1e6, "M"},
	{1e3, "k"},
}

// formatTick labels tick value v on an axis whose ticks are step apart:
// 50000 becomes "50k", 1500 "1.5k", 0.5 "0.5". It shows as many decimals
// as the step needs to tell neighbouring ticks apart and no more.
func formatTick(v, step float64) string {
	if v == 0 {
		return "0"
	}
	abs := math.Abs(v)
	if abs < 1e-3 || abs >= 1e15 {
		// Beyond the suffixes, or so small that a fixed decimal would be
		// mostly zeros: scientific notation is the compact form.
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
	unit, suffix := 1.0, ""
	for _, u := range siUnits {
		if abs >= u.size {
			unit, suffix = u.size, u.suffix
			break
		}
	}
	decimals := 0
	if scaled := step / unit; scaled < 1 {
		// The small epsilon keeps an exact 0.1 from asking for two
		// decimals because log10(0.1) rounds to just over -1.
		decimals = int(math.Ceil(-math.Log10(scaled) - 1e-9))
	}
	decimals = min(decimals, 12)
	s := strconv.FormatFloat(v/unit, 'f', decimals, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
	}
	return s + suffix
}
