package report

import (
	"bytes"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

func sampleLineChart() LineChart {
	return LineChart{
		Title:  "Claim latency",
		XLabel: "sandboxes",
		YLabel: "latency (ms)",
		Series: []Series{
			{Name: "p50", X: []float64{100, 1000, 10000, 50000}, Y: []float64{3, 4.5, 7, 12.3}},
			{Name: "p99", X: []float64{100, 1000, 10000, 50000}, Y: []float64{9, 15, 40, 95}},
			{Name: "single point", X: []float64{20000}, Y: []float64{60}},
		},
		HLines: []RefLine{{Label: "target", Y: 150}},
	}
}

func TestLineChartSVG(t *testing.T) {
	tests := []struct {
		name  string
		chart LineChart
	}{
		{"linear", sampleLineChart()},
		{"log x", func() LineChart { c := sampleLineChart(); c.LogX = true; return c }()},
		{"log both", func() LineChart { c := sampleLineChart(); c.LogX, c.LogY = true, true; return c }()},
		{"negative values", LineChart{
			Title:  "drift",
			Series: []Series{{Name: "skew", X: []float64{-5, 0, 5}, Y: []float64{-0.3, 0.1, 0.25}}},
			HLines: []RefLine{{Label: "floor", Y: -1}},
		}},
		{"flat line", LineChart{Series: []Series{{Name: "const", X: []float64{1, 2, 3}, Y: []float64{7, 7, 7}}}}},
		{"many series cycle the palette", func() LineChart {
			var c LineChart
			for i := range 23 {
				c.Series = append(c.Series, Series{Name: "run " + string(rune('A'+i)), X: []float64{0, 1}, Y: []float64{float64(i), float64(2 * i)}})
			}
			return c
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.chart.SVG()
			if err != nil {
				t.Fatal(err)
			}
			doc := parseSVG(t, b)
			checkRoot(t, doc)

			if tt.chart.Title != "" && !slices.Equal(doc.texts("title"), []string{tt.chart.Title}) {
				t.Errorf("title texts = %q, want [%q]", doc.texts("title"), tt.chart.Title)
			}
			legend := doc.texts("legend-label")
			for i, s := range tt.chart.Series {
				if !slices.Contains(legend, s.Name) {
					t.Errorf("series %d %q missing from legend %q", i, s.Name, legend)
				}
			}
			for _, l := range tt.chart.HLines {
				if !doc.hasText(l.Label) {
					t.Errorf("reference line label %q missing", l.Label)
				}
			}
			if got, want := len(doc.find("line", "ref-line")), len(tt.chart.HLines); got != want {
				t.Errorf("%d ref lines drawn, want %d", got, want)
			}
			if tt.chart.XLabel != "" && !slices.Equal(doc.texts("x-label"), []string{tt.chart.XLabel}) {
				t.Errorf("x label = %q, want %q", doc.texts("x-label"), tt.chart.XLabel)
			}
			if tt.chart.YLabel != "" && !slices.Equal(doc.texts("y-label"), []string{tt.chart.YLabel}) {
				t.Errorf("y label = %q, want %q", doc.texts("y-label"), tt.chart.YLabel)
			}

			area := doc.plotArea(t)
			points := 0
			for _, s := range tt.chart.Series {
				points += len(s.X)
			}
			circles := doc.find("circle", "point")
			if len(circles) != points {
				t.Errorf("%d point markers, want %d", len(circles), points)
			}
			for _, c := range circles {
				if x, y := c.num(t, "cx"), c.num(t, "cy"); !area.contains(x, y) {
					t.Errorf("point (%g, %g) outside plot area %+v", x, y, area)
				}
			}
			for _, pl := range doc.find("polyline", "line") {
				for _, p := range parsePoints(t, pl.attrs["points"]) {
					if !area.contains(p[0], p[1]) {
						t.Errorf("line vertex %v outside plot area %+v", p, area)
					}
				}
			}
			for _, l := range doc.find("line", "ref-line") {
				if y := l.num(t, "y1"); !area.contains(area.left, y) {
					t.Errorf("reference line at y=%g outside plot area %+v", y, area)
				}
			}

			// Every series gets its own colour while the palette lasts.
			colours := map[string]bool{}
			for _, pl := range doc.find("polyline", "line") {
				colours[pl.attrs["stroke"]] = true
			}
			if lines := len(doc.find("polyline", "line")); len(colours) != min(lines, len(palette)) {
				t.Errorf("%d distinct line colours for %d lines", len(colours), lines)
			}
		})
	}
}

func TestLineChartPointPositions(t *testing.T) {
	// The smallest and largest values must land on the correct side: small
	// y low on the page (large SVG y), small x to the left.
	c := LineChart{Series: []Series{{Name: "s", X: []float64{1, 1000}, Y: []float64{1, 1000}}}, LogX: true, LogY: true}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b)
	area := doc.plotArea(t)
	circles := doc.find("circle", "point")
	if len(circles) != 2 {
		t.Fatalf("%d points, want 2", len(circles))
	}
	lowX, lowY := circles[0].num(t, "cx"), circles[0].num(t, "cy")
	highX, highY := circles[1].num(t, "cx"), circles[1].num(t, "cy")
	// 1 and 1000 are exact decades, so they sit exactly on the plot edges.
	if math.Abs(lowX-area.left) > 0.01 || math.Abs(lowY-area.bottom) > 0.01 {
		t.Errorf("point (1, 1) at (%g, %g), want bottom-left corner (%g, %g)", lowX, lowY, area.left, area.bottom)
	}
	if math.Abs(highX-area.right) > 0.01 || math.Abs(highY-area.top) > 0.01 {
		t.Errorf("point (1000, 1000) at (%g, %g), want top-right corner (%g, %g)", highX, highY, area.right, area.top)
	}
}

func TestLineChartLogTickLabels(t *testing.T) {
	c := LineChart{
		LogX: true, LogY: true,
		Series: []Series{{Name: "s", X: []float64{1, 100000}, Y: []float64{0.5, 20}}},
	}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b)
	if got, want := doc.texts("x-tick"), []string{"1", "10", "100", "1k", "10k", "100k"}; !slices.Equal(got, want) {
		t.Errorf("x tick labels = %q, want %q", got, want)
	}
	if got, want := doc.texts("y-tick"), []string{"0.1", "1", "10", "100"}; !slices.Equal(got, want) {
		t.Errorf("y tick labels = %q, want %q", got, want)
	}
}

func TestChartEscapesText(t *testing.T) {
	const nasty = `a <b> & "c" 'd'`
	charts := map[string]interface{ SVG() ([]byte, error) }{
		"line": LineChart{
			Title: nasty, XLabel: nasty, YLabel: nasty,
			Series: []Series{{Name: nasty, X: []float64{1}, Y: []float64{1}}},
			HLines: []RefLine{{Label: nasty, Y: 1}},
		},
		"bar": BarChart{
			Title: nasty, YLabel: nasty, Categories: []string{nasty},
			Series: []BarSeries{{Name: nasty, Values: []float64{1}}},
			HLines: []RefLine{{Label: nasty, Y: 1}},
		},
	}
	for _, name := range []string{"line", "bar"} {
		t.Run(name, func(t *testing.T) {
			b, err := charts[name].SVG()
			if err != nil {
				t.Fatal(err)
			}
			if bytes.Contains(b, []byte("<b>")) || bytes.Contains(b, []byte(" & ")) {
				t.Errorf("raw markup leaked into the SVG:\n%s", b)
			}
			if !bytes.Contains(b, []byte("a &lt;b&gt; &amp; ")) {
				t.Errorf("escaped title missing:\n%s", b)
			}
			doc := parseSVG(t, b)
			if got := doc.texts("title"); !slices.Equal(got, []string{nasty}) {
				t.Errorf("title text = %q, want [%q]", got, nasty)
			}
			if !slices.Contains(doc.texts("legend-label"), nasty) {
				t.Errorf("legend %q lacks %q", doc.texts("legend-label"), nasty)
			}
		})
	}
}

func TestChartReplacesInvalidXMLCharacters(t *testing.T) {
	c := LineChart{Title: "bell\a", Series: []Series{{Name: "s", X: []float64{1}, Y: []float64{1}}}}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	parseSVG(t, b)
}

func TestLineChartDeterministic(t *testing.T) {
	c := sampleLineChart()
	first, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		again, err := sampleLineChart().SVG()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(first, again) {
			t.Fatal("two renders of the same chart differ")
		}
	}
}

func TestLineChartErrors(t *testing.T) {
	ok := Series{Name: "ok", X: []float64{1, 2}, Y: []float64{1, 2}}
	tests := []struct {
		name    string
		chart   LineChart
		want    error
		mention string // text the message must contain to locate the problem
	}{
		{"no series", LineChart{Title: "empty"}, errNoSeries, `line chart "empty"`},
		{"only empty series", LineChart{Series: []Series{{Name: "none"}}}, errNoPoints, ""},
		{"length mismatch", LineChart{Series: []Series{ok, {Name: "bad", X: []float64{1, 2}, Y: []float64{1}}}},
			errLengthMismatch, `series 1 "bad"`},
		{"NaN y", LineChart{Series: []Series{{Name: "nan", X: []float64{1, 2}, Y: []float64{1, math.NaN()}}}},
			errNotFinite, "y value 1"},
		{"Inf x", LineChart{Series: []Series{{Name: "inf", X: []float64{math.Inf(1)}, Y: []float64{1}}}},
			errNotFinite, "x value 0"},
		{"zero on log x", LineChart{LogX: true, Series: []Series{{Name: "z", X: []float64{0, 1}, Y: []float64{1, 2}}}},
			errNotPositive, "x value 0"},
		{"negative on log y", LineChart{LogY: true, Series: []Series{{Name: "n", X: []float64{1, 2}, Y: []float64{1, -2}}}},
			errNotPositive, "y value 1"},
		{"NaN reference line", LineChart{Series: []Series{ok}, HLines: []RefLine{{Label: "target", Y: math.NaN()}}},
			errNotFinite, `reference line 0 "target"`},
		{"reference line at zero on log y", LineChart{LogY: true, Series: []Series{ok}, HLines: []RefLine{{Label: "zero", Y: 0}}},
			errNotPositive, "reference line"},
		{"range overflows", LineChart{Series: []Series{{Name: "huge", X: []float64{-math.MaxFloat64, math.MaxFloat64}, Y: []float64{1, 2}}}},
			errRangeTooWide, "x axis"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := tt.chart.SVG()
			if !errors.Is(err, tt.want) {
				t.Fatalf("err = %v, want %v", err, tt.want)
			}
			if b != nil {
				t.Errorf("got %d bytes of output alongside the error", len(b))
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
		})
	}
}
