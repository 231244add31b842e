package report

import (
	"fmt"
	"math"
	"slices"
)

// BarSeries is one named set of bars, one value per category.
type BarSeries struct {
	Name   string
	Values []float64
}

// BarChart draws grouped bars: one group per category, one bar per series
// in each group. Bars grow from zero, so the y axis always includes zero and
// negative values hang below it.
type BarChart struct {
	Title, YLabel string
	Categories    []string
	Series        []BarSeries // each BarSeries.Values has len(Categories)
	HLines        []RefLine
}

const (
	// groupFill is the share of a category's width its bars take; the rest
	// separates neighbouring groups.
	groupFill = 0.8
	// minLabelSpacing is the least distance between neighbouring tilted
	// category labels, measured across the text.
	minLabelSpacing = fontSize + 2
	// tiltedLabelDrop is how far below the tick the end of a tilted label
	// sits, clear of the axis line.
	tiltedLabelDrop = 8.0
	// maxCategoryLabelWidth truncates longer category labels so one of
	// them cannot take over the space below the plot.
	maxCategoryLabelWidth = 140.0
)

// SVG renders the chart as a standalone SVG document.
func (c BarChart) SVG() ([]byte, error) {
	if err := c.validate(); err != nil {
		return nil, fmt.Errorf("report: bar chart %q: %w", c.Title, err)
	}

	lo, hi := 0.0, 0.0
	for _, s := range c.Series {
		for _, v := range s.Values {
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
	}
	for _, l := range c.HLines {
		lo, hi = math.Min(lo, l.Y), math.Max(hi, l.Y)
	}
	yAxis, err := newAxis(false, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("report: bar chart %q: y axis: %w", c.Title, err)
	}

	names := make([]string, len(c.Series))
	for i, s := range c.Series {
		names[i] = seriesName(s.Name, i)
	}
	cats := c.layoutCategories()
	f := newFrame(frameSpec{
		title:       c.Title,
		yLabel:      c.YLabel,
		yTickLabels: yAxis.labels(),
		xTickBand:   cats.band,
		legendNames: names,
		minLeft:     cats.reach,
	})

	w := newSVG(f.width, f.height)
	f.drawTitle(w, c.Title)
	f.drawYAxis(w, yAxis, c.YLabel)

	groupWidth := f.plotWidth() / float64(len(c.Categories))
	barWidth := groupWidth * groupFill / float64(len(c.Series))
	// A hairline gap between bars of one group keeps same-height
	// neighbours from merging; it is dropped when bars get too thin.
	gap := 0.0
	if barWidth > 4 {
		gap = 1
	}
	zero := roundPx(f.yPos(yAxis, 0))
	for i, s := range c.Series {
		st := styleFor(i)
		w.open("g", attr{"class", "series"})
		for j, v := range s.Values {
			groupLeft := f.left + float64(j)*groupWidth + groupWidth*(1-groupFill)/2
			// Round the edges before taking the height so the bar's
			// bottom lands exactly on the zero line in the output.
			y := roundPx(f.yPos(yAxis, v))
			w.open("rect", attr{"class", "bar"},
				attr{"x", px(groupLeft + float64(i)*barWidth + gap/2)}, attr{"y", px(math.Min(y, zero))},
				attr{"width", px(barWidth - gap)}, attr{"height", px(math.Abs(zero - y))},
				attr{"fill", st.color})
			w.textElem("title", names[i]+" / "+c.Categories[j]+": "+exact(v))
			w.close("rect")
		}
		w.close("g")
	}

	w.open("g", attr{"class", "x-axis"})
	for j, label := range cats.text {
		if label == "" {
			continue
		}
		x := f.left + (float64(j)+0.5)*groupWidth
		if cats.angle != 0 {
			// The label ends under its group and runs down to the left.
			// Shifting it right by part of the glyph height centres
			// the text, not its baseline, on the group.
			x += fontSize / 3 * math.Sin(cats.angle*math.Pi/180)
			y := f.bottom + tickLength + tiltedLabelDrop
			w.textElem("text", label, attr{"class", "x-tick"},
				attr{"x", px(x)}, attr{"y", px(y)}, attr{"text-anchor", "end"},
				attr{"transform", "rotate(-" + px(cats.angle) + " " + px(x) + " " + px(y) + ")"})
		} else {
			w.textElem("text", label, attr{"class", "x-tick"},
				attr{"x", px(x)}, attr{"y", px(f.bottom + tickLength + fontSize + 1)}, attr{"text-anchor", "middle"})
		}
	}
	// A zero line distinguishes positive from negative bars when the
	// axis goes below zero.
	if yAxis.lo < 0 {
		w.leaf("line", attr{"class", "zero"},
			attr{"x1", px(f.left)}, attr{"y1", px(zero)}, attr{"x2", px(f.right)}, attr{"y2", px(zero)},
			attr{"stroke", "#333333"})
	}
	w.close("g")

	f.drawPlotBorder(w)
	f.drawRefLines(w, yAxis, c.HLines)
	f.drawLegend(w, legendBar)
	return w.finish(), nil
}

func (c BarChart) validate() error {
	if len(c.Categories) == 0 {
		return errNoCategories
	}
	if len(c.Series) == 0 {
		return errNoSeries
	}
	for i, s := range c.Series {
		if len(s.Values) != len(c.Categories) {
			return fmt.Errorf("series %d %q: %w: %d values for %d categories", i, s.Name, errLengthMismatch, len(s.Values), len(c.Categories))
		}
		if err := checkValues(s.Values, false); err != nil {
			return fmt.Errorf("series %d %q: %w", i, s.Name, err)
		}
	}
	for i, l := range c.HLines {
		if err := checkValue(l.Y, false); err != nil {
			return fmt.Errorf("reference line %d %q: %w", i, l.Label, err)
		}
	}
	return nil
}

// categoryLabels is how the category names under a bar chart are drawn.
type categoryLabels struct {
	text  []string // per category; "" where a label is left out to avoid overlap
	angle float64  // degrees the labels are turned anticlockwise; 0 is level
	band  float64  // height the labels take below the plot
	reach float64  // least left margin that keeps the first label on the canvas
}

// layoutCategories keeps labels level when every one fits its group, and
// otherwise tilts them, as little as lets neighbours clear each other.
// When even upright labels would touch, only every k-th is drawn. The
// group width is estimated from the canvas width because the exact plot
// width depends on the y tick labels; the estimate is slightly narrow, so
// it errs towards tilting.
func (c BarChart) layoutCategories() categoryLabels {
	groupWidth := (canvasWidth - 100) / float64(len(c.Categories))
	out := categoryLabels{text: slices.Clone(c.Categories)}
	widest := 0.0
	for _, cat := range c.Categories {
		widest = math.Max(widest, textWidth(cat, fontSize))
	}
	if widest <= groupWidth-6 {
		out.band = tickLength + lineHeight
		return out
	}

	stride := 1
	for _, angle := range []float64{35, 60, 90} {
		if groupWidth*math.Sin(angle*math.Pi/180) >= minLabelSpacing {
			out.angle = angle
			break
		}
	}
	if out.angle == 0 {
		out.angle = 90
		stride = int(math.Ceil(minLabelSpacing / groupWidth))
	}
	widest = 0
	for j := range out.text {
		if j%stride != 0 {
			out.text[j] = ""
			continue
		}
		out.text[j] = fitText(out.text[j], maxCategoryLabelWidth)
		widest = math.Max(widest, textWidth(out.text[j], fontSize))
	}
	sin, cos := math.Sincos(out.angle * math.Pi / 180)
	out.band = tickLength + tiltedLabelDrop + widest*sin + outerPad/2
	out.reach = outerPad + widest*cos + fontSize*sin - groupWidth/2
	return out
}
