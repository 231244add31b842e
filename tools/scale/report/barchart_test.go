package report

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
)

func sampleBarChart() BarChart {
	return BarChart{
		Title:      "Throughput by node count",
		YLabel:     "claims/s",
		Categories: []string{"1 node", "4 nodes", "16 nodes"},
		Series: []BarSeries{
			{Name: "cold", Values: []float64{120, 430, 1500}},
			{Name: "warm pool", Values: []float64{900, 3400, 12000}},
		},
		HLines: []RefLine{{Label: "goal", Y: 10000}},
	}
}

func TestBarChartSVG(t *testing.T) {
	long := sampleBarChart()
	long.Categories = []string{"a very long category label that must tilt", "another long label here", "and a third long label"}
	many := BarChart{Series: []BarSeries{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	var everyOther []string
	for i := range 80 {
		cat := fmt.Sprintf("run %02d", i)
		many.Categories = append(many.Categories, cat)
		if i%2 == 0 {
			everyOther = append(everyOther, cat)
		}
		for j := range many.Series {
			many.Series[j].Values = append(many.Series[j].Values, float64(i*(j+1)))
		}
	}
	tests := []struct {
		name  string
		chart BarChart
		// wantCategoryLabels are the category texts drawn, in order.
		wantCategoryLabels []string
	}{
		{"positive", sampleBarChart(), sampleBarChart().Categories},
		{"negative values", BarChart{
			Title:      "delta",
			Categories: []string{"a", "b", "c"},
			Series:     []BarSeries{{Name: "change", Values: []float64{-5, 0, 12.5}}},
		}, []string{"a", "b", "c"}},
		{"all zero", BarChart{Categories: []string{"x"}, Series: []BarSeries{{Name: "z", Values: []float64{0}}}}, []string{"x"}},
		{"tilted and truncated", long, []string{"a very long catego…", "another long label…", "and a third long l…"}},
		{"crowded categories thinned", many, everyOther},
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
			ticks := doc.texts("x-tick")
			if want := tt.wantCategoryLabels; !slices.Equal(ticks, want) {
				t.Errorf("category labels = %q, want %q", ticks, want)
			}

			area := doc.plotArea(t)
			bars := doc.find("rect", "bar")
			if want := len(tt.chart.Series) * len(tt.chart.Categories); len(bars) != want {
				t.Fatalf("%d bars, want %d", len(bars), want)
			}
			for _, bar := range bars {
				x, y := bar.num(t, "x"), bar.num(t, "y")
				w, h := bar.num(t, "width"), bar.num(t, "height")
				if w <= 0 || h < 0 {
					t.Errorf("bar size %gx%g", w, h)
				}
				if !area.contains(x, y) || !area.contains(x+w, y+h) {
					t.Errorf("bar (%g, %g, %g x %g) outside plot area %+v", x, y, w, h, area)
				}
			}
			// Bars of one series share a colour; different series differ.
			colours := map[string]bool{}
			for _, bar := range bars {
				colours[bar.attrs["fill"]] = true
			}
			if len(colours) != len(tt.chart.Series) {
				t.Errorf("%d bar colours for %d series", len(colours), len(tt.chart.Series))
			}
		})
	}
}

func TestBarChartBarHeights(t *testing.T) {
	c := BarChart{Categories: []string{"a", "b"}, Series: []BarSeries{{Name: "s", Values: []float64{10, 20}}}}
	b, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, b)
	area := doc.plotArea(t)
	bars := doc.find("rect", "bar")
	h10, h20 := bars[0].num(t, "height"), bars[1].num(t, "height")
	if math.Abs(h20-2*h10) > 0.02 {
		t.Errorf("bar heights %g and %g, want the second twice the first", h10, h20)
	}
	// Bars grow from zero, which is the bottom of an all-positive chart.
	for _, bar := range bars {
		if bottom := bar.num(t, "y") + bar.num(t, "height"); math.Abs(bottom-area.bottom) > 0.02 {
			t.Errorf("bar ends at %g, want the plot bottom %g", bottom, area.bottom)
		}
	}
	if got, want := doc.texts("y-tick"), []string{"0", "5", "10", "15", "20"}; !slices.Equal(got, want) {
		t.Errorf("y tick labels = %q, want %q", got, want)
	}
}

func TestBarChartDeterministic(t *testing.T) {
	first, err := sampleBarChart().SVG()
	if err != nil {
		t.Fatal(err)
	}
	again, err := sampleBarChart().SVG()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first, again) {
		t.Fatal("two renders of the same chart differ")
	}
}

func TestBarChartErrors(t *testing.T) {
	tests := []struct {
		name    string
		chart   BarChart
		want    error
		mention string
	}{
		{"no categories", BarChart{Title: "t", Series: []BarSeries{{Name: "s"}}}, errNoCategories, `bar chart "t"`},
		{"no series", BarChart{Categories: []string{"a"}}, errNoSeries, ""},
		{"too few values", BarChart{Categories: []string{"a", "b"}, Series: []BarSeries{{Name: "short", Values: []float64{1}}}},
			errLengthMismatch, `series 0 "short"`},
		{"too many values", BarChart{Categories: []string{"a"}, Series: []BarSeries{{Name: "long", Values: []float64{1, 2}}}},
			errLengthMismatch, "2 values for 1 categories"},
		{"NaN value", BarChart{Categories: []string{"a", "b"}, Series: []BarSeries{{Name: "s", Values: []float64{1, math.NaN()}}}},
			errNotFinite, "value 1"},
		{"Inf value", BarChart{Categories: []string{"a"}, Series: []BarSeries{{Name: "s", Values: []float64{math.Inf(-1)}}}},
			errNotFinite, "value 0"},
		{"Inf reference line", BarChart{Categories: []string{"a"}, Series: []BarSeries{{Name: "s", Values: []float64{1}}},
			HLines: []RefLine{{Label: "goal", Y: math.Inf(1)}}}, errNotFinite, `reference line 0 "goal"`},
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
