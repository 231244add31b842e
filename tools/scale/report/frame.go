package report

import (
	"math"
	"unicode/utf8"
)

// Canvas and typography constants shared by every chart. The canvas is a
// fixed width so report pages line up; it grows taller only when a long
// legend would otherwise squeeze the plot.
const (
	canvasWidth     = 720.0
	minCanvasHeight = 420.0
	minPlotHeight   = 200.0
	fontSize        = 12.0
	titleFontSize   = 16.0
	lineHeight      = 18.0 // vertical room for one row of fontSize text
	outerPad        = 10.0
	tickLength      = 5.0
	legendSwatch    = 16.0
	legendGap       = 14.0 // between one legend entry and the next
)

// palette gives each series its colour; chosen to stay distinguishable
// from each other and from the grey axes and reference lines.
var palette = []string{
	"#1f6fb4", "#e8761a", "#2b9a3c", "#cf2e2e", "#8a5fc0",
	"#8c5a4b", "#d767b8", "#6f6f6f", "#a8ad1f", "#19aebd",
}

// seriesStyle is how series i is drawn. Past the palette the colours repeat,
// so each further cycle adds a dash pattern to keep the lines apart.
type seriesStyle struct {
	color string
	dash  string // stroke-dasharray, "" for solid
}

func styleFor(i int) seriesStyle {
	dashes := []string{"", "8 4", "2 3", "8 3 2 3"}
	return seriesStyle{
		color: palette[i%len(palette)],
		dash:  dashes[(i/len(palette))%len(dashes)],
	}
}

// textWidth estimates the rendered width of s. SVG has no text metrics
// before rendering; an average glyph of 0.6 em is close for sans-serif and
// only has to be good enough to reserve margins.
func textWidth(s string, size float64) float64 {
	return float64(utf8.RuneCountInString(s)) * size * 0.6
}

// fitText shortens s with an ellipsis so it fits maxWidth, keeping one long
// label from overrunning its neighbours.
func fitText(s string, maxWidth float64) string {
	if textWidth(s, fontSize) <= maxWidth {
		return s
	}
	// Keep as many runes as fit alongside the ellipsis, but at least one.
	keep := max(1, int(maxWidth/(fontSize*0.6))-1)
	runes := []rune(s)
	return string(runes[:min(keep, len(runes))]) + "…"
}

// frameSpec is what the plot area must leave room for.
type frameSpec struct {
	title          string
	xLabel, yLabel string
	yTickLabels    []string
	xTickBand      float64 // height below the plot taken by x tick labels
	legendNames    []string
	// minLeft is the least left margin; tilted category labels reach left
	// of the plot and need it.
	minLeft float64
}

// frame is the pixel layout of one chart: the canvas, the plot area inside
// it, and where the surrounding text goes.
type frame struct {
	width, height            float64
	left, top, right, bottom float64 // plot area edges
	xTickBand                float64
	yLabelX                  float64 // baseline of the rotated y axis label
	legend                   []legendSlot
}

// legendSlot positions one legend entry: x is the swatch's left edge, y the
// text baseline.
type legendSlot struct {
	x, y float64
	name string
}

func newFrame(spec frameSpec) frame {
	f := frame{width: canvasWidth, xTickBand: spec.xTickBand}

	f.top = outerPad + fontSize/2 // room for the top tick label's upper half
	if spec.title != "" {
		f.top = outerPad + titleFontSize + 14
	}

	widest := 0.0
	for _, l := range spec.yTickLabels {
		widest = math.Max(widest, textWidth(l, fontSize))
	}
	f.left = outerPad + widest + tickLength + 4
	if spec.yLabel != "" {
		f.left += lineHeight
	}
	f.left = math.Max(f.left, spec.minLeft)
	// The rotated y label's baseline sits just left of the widest tick
	// label, wherever minLeft put the plot.
	f.yLabelX = f.left - widest - tickLength - 4 - (lineHeight - fontSize)
	// The last x tick label is centred on the right edge; leave it room.
	f.right = f.width - 24

	// Lay legend entries out left to right, wrapping at the plot width.
	// Rows are counted first because the plot's bottom edge, and so the
	// legend's vertical position, depends on how many there are.
	available := f.right - f.left
	x, row := 0.0, 0
	entryRow := make([]int, len(spec.legendNames))
	for i, name := range spec.legendNames {
		name = fitText(name, available-legendSwatch-4)
		w := legendSwatch + 4 + textWidth(name, fontSize)
		if x > 0 && x+w > available {
			row++
			x = 0
		}
		f.legend = append(f.legend, legendSlot{x: f.left + x, name: name})
		entryRow[i] = row
		x += w + legendGap
	}
	rows := 0
	if len(spec.legendNames) > 0 {
		rows = row + 1
	}

	xLabelBand := 0.0
	if spec.xLabel != "" {
		xLabelBand = lineHeight
	}
	bottomBand := spec.xTickBand + xLabelBand + float64(rows)*lineHeight + outerPad
	f.height = math.Max(minCanvasHeight, f.top+minPlotHeight+bottomBand)
	f.bottom = f.height - bottomBand

	legendTop := f.bottom + spec.xTickBand + xLabelBand
	for i := range f.legend {
		f.legend[i].y = legendTop + float64(entryRow[i])*lineHeight + 13
	}
	return f
}

func (f frame) plotWidth() float64  { return f.right - f.left }
func (f frame) plotHeight() float64 { return f.bottom - f.top }

// xPos and yPos place a data value on the plot area; y grows downwards in
// SVG, so larger values sit nearer the top.
func (f frame) xPos(a axis, v float64) float64 { return f.left + a.frac(v)*f.plotWidth() }
func (f frame) yPos(a axis, v float64) float64 { return f.bottom - a.frac(v)*f.plotHeight() }

func (f frame) drawTitle(w *svgWriter, title string) {
	if title == "" {
		return
	}
	w.textElem("text", title,
		attr{"class", "title"},
		attr{"x", px(f.width / 2)}, attr{"y", px(outerPad + titleFontSize)},
		attr{"text-anchor", "middle"},
		attr{"font-size", px(titleFontSize)}, attr{"font-weight", "bold"},
	)
}

// drawYAxis draws horizontal grid lines, ticks and labels for a, and the
// rotated axis label.
func (f frame) drawYAxis(w *svgWriter, a axis, label string) {
	w.open("g", attr{"class", "y-axis"})
	for i, text := range a.labels() {
		y := f.yPos(a, a.ticks[i])
		w.leaf("line", attr{"class", "grid"},
			attr{"x1", px(f.left)}, attr{"y1", px(y)}, attr{"x2", px(f.right)}, attr{"y2", px(y)},
			attr{"stroke", "#e4e4e4"})
		w.leaf("line", attr{"x1", px(f.left - tickLength)}, attr{"y1", px(y)}, attr{"x2", px(f.left)}, attr{"y2", px(y)},
			attr{"stroke", "#333333"})
		w.textElem("text", text, attr{"class", "y-tick"},
			attr{"x", px(f.left - tickLength - 3)}, attr{"y", px(y + 4)}, attr{"text-anchor", "end"})
	}
	if label != "" {
		x, y := f.yLabelX, f.top+f.plotHeight()/2
		w.textElem("text", label, attr{"class", "y-label"},
			attr{"x", px(x)}, attr{"y", px(y)}, attr{"text-anchor", "middle"},
			attr{"transform", "rotate(-90 " + px(x) + " " + px(y) + ")"})
	}
	w.close("g")
}

// drawXAxis draws vertical grid lines, ticks and labels for a numeric x
// axis, and the axis label.
func (f frame) drawXAxis(w *svgWriter, a axis, label string) {
	w.open("g", attr{"class", "x-axis"})
	for i, text := range a.labels() {
		x := f.xPos(a, a.ticks[i])
		w.leaf("line", attr{"class", "grid"},
			attr{"x1", px(x)}, attr{"y1", px(f.top)}, attr{"x2", px(x)}, attr{"y2", px(f.bottom)},
			attr{"stroke", "#e4e4e4"})
		w.leaf("line", attr{"x1", px(x)}, attr{"y1", px(f.bottom)}, attr{"x2", px(x)}, attr{"y2", px(f.bottom + tickLength)},
			attr{"stroke", "#333333"})
		w.textElem("text", text, attr{"class", "x-tick"},
			attr{"x", px(x)}, attr{"y", px(f.bottom + tickLength + fontSize + 1)}, attr{"text-anchor", "middle"})
	}
	f.drawXLabel(w, label)
	w.close("g")
}

func (f frame) drawXLabel(w *svgWriter, label string) {
	if label == "" {
		return
	}
	w.textElem("text", label, attr{"class", "x-label"},
		attr{"x", px(f.left + f.plotWidth()/2)}, attr{"y", px(f.bottom + f.xTickBand + 13)},
		attr{"text-anchor", "middle"})
}

// drawPlotBorder outlines the plot area. Drawn after the data so the axis
// lines stay crisp over bars that reach them; tests also read its bounds.
func (f frame) drawPlotBorder(w *svgWriter) {
	w.leaf("rect", attr{"class", "plot-area"},
		attr{"x", px(f.left)}, attr{"y", px(f.top)},
		attr{"width", px(f.plotWidth())}, attr{"height", px(f.plotHeight())},
		attr{"fill", "none"}, attr{"stroke", "#333333"})
}

// drawRefLines draws each reference line dashed across the plot, with its
// label right-aligned just above it. Drawn last so data cannot hide it.
func (f frame) drawRefLines(w *svgWriter, a axis, lines []RefLine) {
	if len(lines) == 0 {
		return
	}
	w.open("g", attr{"class", "ref-lines"})
	for _, l := range lines {
		y := f.yPos(a, l.Y)
		w.leaf("line", attr{"class", "ref-line"},
			attr{"x1", px(f.left)}, attr{"y1", px(y)}, attr{"x2", px(f.right)}, attr{"y2", px(y)},
			attr{"stroke", "#444444"}, attr{"stroke-width", "1.5"}, attr{"stroke-dasharray", "6 4"})
		label := l.Label
		if label == "" {
			label = exact(l.Y)
		}
		// The white outline behind the glyphs keeps the label readable
		// where it crosses a line or a bar.
		w.textElem("text", label, attr{"class", "ref-label"},
			attr{"x", px(f.right - 4)}, attr{"y", px(y - 4)}, attr{"text-anchor", "end"},
			attr{"fill", "#444444"}, attr{"stroke", "#ffffff"}, attr{"stroke-width", "3"},
			attr{"paint-order", "stroke"})
	}
	w.close("g")
}

// legendKind selects the legend swatch: a line with a marker for line
// charts, a filled square for bar charts, matching what the plot shows.
type legendKind int

const (
	legendLine legendKind = iota
	legendBar
)

func (f frame) drawLegend(w *svgWriter, kind legendKind) {
	w.open("g", attr{"class", "legend"})
	for i, slot := range f.legend {
		st := styleFor(i)
		mid := slot.y - 4 // vertical centre of the text
		switch kind {
		case legendLine:
			line := []attr{
				attr{"x1", px(slot.x)}, attr{"y1", px(mid)},
				attr{"x2", px(slot.x + legendSwatch)}, attr{"y2", px(mid)},
				attr{"stroke", st.color}, attr{"stroke-width", "2"},
			}
			if st.dash != "" {
				line = append(line, attr{"stroke-dasharray", st.dash})
			}
			w.leaf("line", line...)
			w.leaf("circle", attr{"class", "legend-marker"},
				attr{"cx", px(slot.x + legendSwatch/2)}, attr{"cy", px(mid)}, attr{"r", "3"},
				attr{"fill", st.color})
		case legendBar:
			w.leaf("rect", attr{"class", "legend-marker"},
				attr{"x", px(slot.x + 2)}, attr{"y", px(mid - 6)},
				attr{"width", "12"}, attr{"height", "12"}, attr{"fill", st.color})
		}
		w.textElem("text", slot.name, attr{"class", "legend-label"},
			attr{"x", px(slot.x + legendSwatch + 4)}, attr{"y", px(slot.y)})
	}
	w.close("g")
}
