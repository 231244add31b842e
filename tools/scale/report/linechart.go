package report

import (
	"fmt"
	"math"
	"strings"
)

// Series is one named line of points; X and Y have equal lengths.
// Points are joined in the order given, so a harness that records samples
// in sweep order gets a line in sweep order.
type Series struct {
	Name string
	X, Y []float64
}

// RefLine is a horizontal reference line, such as a latency target.
type RefLine struct {
	Label string
	Y     float64
}

// LineChart plots series against shared axes. LogX/LogY use a base-10 log
// scale (all values on that axis must be > 0).
type LineChart struct {
	Title, XLabel, YLabel string
	LogX, LogY            bool
	Series                []Series
	// HLines are horizontal reference lines (e.g. a target), drawn dashed
	// and labelled. The y axis always extends to include them, so a target
	// far from the data is still visible.
	HLines []RefLine
}

// SVG renders the chart as a standalone SVG document.
func (c LineChart) SVG() ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("report: line chart %q: %w", c.Title, err)
	}

	xLo, xHi := math.Inf(1), math.Inf(-1)
	yLo, yHi := math.Inf(1), math.Inf(-1)
	for _, s := range c.Series {
		for i := range s.X {
			xLo, xHi = math.Min(xLo, s.X[i]), math.Max(xHi, s.X[i])
			yLo, yHi = math.Min(yLo, s.Y[i]), math.Max(yHi, s.Y[i])
		}
	}
	for _, l := range c.HLines {
		yLo, yHi = math.Min(yLo, l.Y), math.Max(yHi, l.Y)
	}
	xAxis, err := newAxis(c.LogX, xLo, xHi)
	if err != nil {
		return nil, fmt.Errorf("report: line chart %q: x axis: %w", c.Title, err)
	}
	yAxis, err := newAxis(c.LogY, yLo, yHi)
	if err != nil {
		return nil, fmt.Errorf("report: line chart %q: y axis: %w", c.Title, err)
	}

	names := make([]string, len(c.Series))
	for i, s := range c.Series {
		names[i] = seriesName(s.Name, i)
	}
	f := newFrame(frameSpec{
		title:       c.Title,
		xLabel:      c.XLabel,
		yLabel:      c.YLabel,
		yTickLabels: yAxis.labels(),
		xTickBand:   tickLength + lineHeight,
		legendNames: names,
	})

	w := newSVG(f.width, f.height)
	f.drawTitle(w, c.Title)
	f.drawYAxis(w, yAxis, c.YLabel)
	f.drawXAxis(w, xAxis, c.XLabel)
	for i, s := range c.Series {
		drawLineSeries(w, f, xAxis, yAxis, i, names[i], s)
	}
	f.drawPlotBorder(w)
	f.drawRefLines(w, yAxis, c.HLines)
	f.drawLegend(w, legendLine)
	return w.finish(), nil
}

func (c LineChart) validate() error {
	if len(c.Series) == 0 {
		return errNoSeries
	}
	points := 0
	for i, s := range c.Series {
		if len(s.X) != len(s.Y) {
			return fmt.Errorf("series %d %q: %w: %d x values, %d y values", i, s.Name, errLengthMismatch, len(s.X), len(s.Y))
		}
		if err := checkValues(s.X, c.LogX); err != nil {
			return fmt.Errorf("series %d %q: x %w", i, s.Name, err)
		}
		if err := checkValues(s.Y, c.LogY); err != nil {
			return fmt.Errorf("series %d %q: y %w", i, s.Name, err)
		}
		points += len(s.X)
	}
	if points == 0 {
		// Empty series alone leave no range to build axes from.
		return errNoPoints
	}
	for i, l := range c.HLines {
		if err := checkValue(l.Y, c.LogY); err != nil {
			return fmt.Errorf("reference line %d %q: %w", i, l.Label, err)
		}
	}
	return nil
}

// drawLineSeries draws one series as a polyline through its points with a
// marker on each point; the markers carry the exact values as tooltips.
func drawLineSeries(w *svgWriter, f frame, xAxis, yAxis axis, i int, name string, s Series) {
	st := styleFor(i)
	w.open("g", attr{"class", "series"})
	if len(s.X) > 1 {
		var points strings.Builder
		for j := range s.X {
			if j > 0 {
				points.WriteByte(' ')
			}
			points.WriteString(px(f.xPos(xAxis, s.X[j])) + "," + px(f.yPos(yAxis, s.Y[j])))
		}
		line := []attr{
			attr{"class", "line"},
			attr{"points", points.String()},
			attr{"fill", "none"}, attr{"stroke", st.color}, attr{"stroke-width", "2"},
			attr{"stroke-linejoin", "round"},
		}
		if st.dash != "" {
			line = append(line, attr{"stroke-dasharray", st.dash})
		}
		w.leaf("polyline", line...)
	}
	for j := range s.X {
		w.open("circle", attr{"class", "point"},
			attr{"cx", px(f.xPos(xAxis, s.X[j]))}, attr{"cy", px(f.yPos(yAxis, s.Y[j]))},
			attr{"r", "3.5"}, attr{"fill", st.color}, attr{"stroke", "#ffffff"}, attr{"stroke-width", "1"})
		w.textElem("title", name+": ("+exact(s.X[j])+", "+exact(s.Y[j])+")")
		w.close("circle")
	}
	w.close("g")
}
