package monitoring_test

import (
	"context"
	"fmt"
	"html"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/tests/prometheus"
)

// The picture's layout: panels in a grid, each a small line chart.
const (
	pictureColumns = 3
	panelWidth     = 420
	panelHeight    = 190
	plotLeft       = 56
	plotTop        = 34
	plotRight      = 12
	plotBottom     = 46
)

var seriesColours = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"}

// writeDashboardPicture draws every panel's data from start to end into
// an SVG file: under Bazel in the test's undeclared outputs
// (bazel-testlogs/…/test.outputs/dashboard.svg), docs/operations.md shows
// one; under go test in the test's temporary directory.
func writeDashboardPicture(t *testing.T, ctx context.Context, prom *prometheus.Server, panels []prometheus.Panel, start, end time.Time) {
	t.Helper()
	// One chart per panel title (a panel's several queries share it).
	var titles []string
	byTitle := map[string][]prometheus.Panel{}
	for _, p := range panels {
		if _, ok := byTitle[p.Title]; !ok {
			titles = append(titles, p.Title)
		}
		byTitle[p.Title] = append(byTitle[p.Title], p)
	}
	rows := (len(titles) + pictureColumns - 1) / pictureColumns
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="11">`+"\n",
		pictureColumns*panelWidth, rows*panelHeight+24)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="8" y="16" font-size="13">sandbox-operator dashboard, %s run of //tests/e2e/monitoring (%s)</text>`+"\n",
		end.UTC().Format("2006-01-02"), html.EscapeString(end.Sub(start).Round(time.Second).String()))
	for i, title := range titles {
		x, y := (i%pictureColumns)*panelWidth, (i/pictureColumns)*panelHeight+24
		var series []prometheus.Series
		var legends []string
		for _, p := range byTitle[title] {
			res, err := prom.QueryRange(ctx, p.Expr, start, end, time.Second)
			if err != nil {
				t.Errorf("panel %s: %v", title, err)
				continue
			}
			for _, s := range res {
				series = append(series, s)
				legends = append(legends, legend(s.Metric))
			}
		}
		drawPanel(&b, x, y, title, series, legends, start, end)
	}
	b.WriteString("</svg>\n")
	dir := os.Getenv("TEST_UNDECLARED_OUTPUTS_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	path := filepath.Join(dir, "dashboard.svg")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("the dashboard's panels, drawn from this run: %s", path)
}

// legend names a series by its labels, job and instance left out.
func legend(m map[string]string) string {
	var keys []string
	for k := range m {
		if k != "job" && k != "instance" && k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, k+"="+m[k])
	}
	if len(parts) == 0 {
		return "value"
	}
	return strings.Join(parts, ",")
}

func drawPanel(b *strings.Builder, x, y int, title string, series []prometheus.Series, legends []string, start, end time.Time) {
	w, h := panelWidth-plotLeft-plotRight, panelHeight-plotTop-plotBottom
	fmt.Fprintf(b, `<g transform="translate(%d,%d)"><rect x="4" y="4" width="%d" height="%d" fill="none" stroke="#ccc"/>`, x, y, panelWidth-8, panelHeight-8)
	fmt.Fprintf(b, `<text x="12" y="22" font-weight="bold">%s</text>`, html.EscapeString(title))
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.Values {
			if f, ok := sampleValue(v); ok {
				lo, hi = math.Min(lo, f), math.Max(hi, f)
			}
		}
	}
	if math.IsInf(lo, 0) {
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#999">no data</text></g>`+"\n", plotLeft+w/2-20, plotTop+h/2)
		return
	}
	lo = math.Min(lo, 0)
	if hi <= lo {
		hi = lo + 1
	}
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`, plotLeft, plotTop+h, plotLeft+w, plotTop+h)
	fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#999"/>`, plotLeft, plotTop, plotLeft, plotTop+h)
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, plotLeft-4, plotTop+8, strconv.FormatFloat(hi, 'g', 3, 64))
	fmt.Fprintf(b, `<text x="%d" y="%d" text-anchor="end">%s</text>`, plotLeft-4, plotTop+h, strconv.FormatFloat(lo, 'g', 3, 64))
	span := end.Sub(start).Seconds()
	for i, s := range series {
		colour := seriesColours[i%len(seriesColours)]
		var pts []string
		for _, v := range s.Values {
			f, ok := sampleValue(v)
			ts, tok := v[0].(float64)
			if !ok || !tok {
				continue
			}
			px := float64(plotLeft) + (ts-float64(start.Unix()))/span*float64(w)
			py := float64(plotTop+h) - (f-lo)/(hi-lo)*float64(h)
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", px, py))
		}
		fmt.Fprintf(b, `<polyline fill="none" stroke="%s" stroke-width="1.5" points="%s"/>`, colour, strings.Join(pts, " "))
		if i < 3 {
			text := legends[i]
			if len(text) > 60 {
				text = text[:57] + "…"
			}
			fmt.Fprintf(b, `<text x="%d" y="%d" fill="%s">%s</text>`, plotLeft, plotTop+h+14+12*i, colour, html.EscapeString(text))
		}
	}
	if len(series) > 3 {
		fmt.Fprintf(b, `<text x="%d" y="%d" fill="#666">+%d more</text>`, plotLeft+w-60, plotTop+h+14, len(series)-3)
	}
	b.WriteString("</g>\n")
}

// sampleValue reads a sample's value ("1.5", "NaN", …) when it is finite.
func sampleValue(v [2]any) (float64, bool) {
	s, ok := v[1].(string)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}
