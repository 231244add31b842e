package report

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPageMarkdown(t *testing.T) {
	var p Page
	p.Heading(1, "Scale run")
	p.Para("Two nodes, *warm* pool.")
	p.Table([]string{"metric", "value"}, [][]string{
		{"p50 | p99", "1ms\n2ms"},
		{"short"},
		{"a", "b", "extra"},
	})
	p.Image("latency [ms]", "plots/latency.svg")
	p.Code("sh", "go test ./...")
	p.Heading(9, "deep\nheading")

	want := "# Scale run\n" +
		"\n" +
		"Two nodes, *warm* pool.\n" +
		"\n" +
		"| metric | value |  |\n" +
		"| --- | --- | --- |\n" +
		"| p50 \\| p99 | 1ms<br>2ms |  |\n" +
		"| short |  |  |\n" +
		"| a | b | extra |\n" +
		"\n" +
		"![latency \\[ms\\]](plots/latency.svg)\n" +
		"\n" +
		"```sh\n" +
		"go test ./...\n" +
		"```\n" +
		"\n" +
		"###### deep heading\n"
	if got := string(p.Bytes()); got != want {
		t.Errorf("markdown mismatch\ngot:\n%s\nwant:\n%s", got, want)
	}
}

func TestPageBlocks(t *testing.T) {
	tests := []struct {
		name string
		add  func(p *Page)
		want string
	}{
		{"empty page", func(*Page) {}, ""},
		{"code containing a fence", func(p *Page) { p.Code("md", "```go\nx\n```\n") },
			"````md\n```go\nx\n```\n````\n"},
		{"code with backtick in info string", func(p *Page) { p.Code("a`b", "x") }, "~~~a`b\nx\n~~~\n"},
		{"empty code", func(p *Page) { p.Code("", "") }, "```\n```\n"},
		{"image path with spaces", func(p *Page) { p.Image("plot", "my plot (1).svg") }, "![plot](<my plot (1).svg>)\n"},
		{"table without columns", func(p *Page) { p.Table(nil, nil) }, ""},
		{"table cell with CRLF", func(p *Page) { p.Table([]string{"a\r\nb"}, nil) }, "| a<br>b |\n| --- |\n"},
		{"paragraph kept as is", func(p *Page) { p.Para("line one\nline | two\n") }, "line one\nline | two\n"},
		{"heading level clamped up", func(p *Page) { p.Heading(0, "x") }, "# x\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var p Page
			tt.add(&p)
			if got := string(p.Bytes()); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPageWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "report") // does not exist yet
	var p Page
	p.Heading(1, "Run")
	p.AddChart("latency.svg", "latency", sampleLineChart())
	p.AddChart("plots/throughput.svg", "throughput", sampleBarChart())
	p.Para("done")
	if err := p.WriteDir(dir, "README.md"); err != nil {
		t.Fatal(err)
	}

	page, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Run\n\n![latency](latency.svg)\n\n![throughput](plots/throughput.svg)\n\ndone\n"
	if string(page) != want {
		t.Errorf("page = %q, want %q", page, want)
	}
	for file, chart := range map[string]interface{ SVG() ([]byte, error) }{
		"latency.svg":          sampleLineChart(),
		"plots/throughput.svg": sampleBarChart(),
	} {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
		if err != nil {
			t.Fatal(err)
		}
		parseSVG(t, got)
		wantSVG, err := chart.SVG()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(wantSVG) {
			t.Errorf("%s differs from the chart's own SVG", file)
		}
	}
}

func TestPageAddChartSnapshotsData(t *testing.T) {
	// The chart is rendered when added, so the harness may reuse its
	// slices afterwards without changing the report.
	dir := t.TempDir()
	c := sampleLineChart()
	want, err := c.SVG()
	if err != nil {
		t.Fatal(err)
	}
	var p Page
	p.AddChart("c.svg", "c", c)
	c.Series[0].Y[0] = 1e6
	if err := p.WriteDir(dir, "index.md"); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, "c.svg"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Error("chart file reflects a change made after AddChart")
	}
}

func TestPageWriteDirErrors(t *testing.T) {
	tests := []struct {
		name    string
		build   func(p *Page)
		page    string
		want    error  // nil: only the message is checked
		mention string // text the error must contain
	}{
		{"chart fails to render", func(p *Page) {
			p.AddChart("bad.svg", "bad", LineChart{Title: "broken"})
		}, "index.md", errNoSeries, `"bad.svg"`},
		{"nil chart", func(p *Page) { p.AddChart("nil.svg", "nil", nil) }, "index.md", errNilChart, `"nil.svg"`},
		{"chart outside dir", func(p *Page) {
			p.AddChart("../escape.svg", "x", sampleBarChart())
		}, "index.md", nil, "inside the report directory"},
		{"absolute chart path", func(p *Page) {
			p.AddChart("/tmp/abs.svg", "x", sampleBarChart())
		}, "index.md", nil, "inside the report directory"},
		{"chart added twice", func(p *Page) {
			p.AddChart("a.svg", "a", sampleBarChart())
			p.AddChart("./a.svg", "a", sampleBarChart())
		}, "index.md", nil, "added twice"},
		{"chart named like the page", func(p *Page) {
			p.AddChart("index.md", "a", sampleBarChart())
		}, "index.md", nil, "overwrite the page"},
		{"page outside dir", func(*Page) {}, "../index.md", nil, "inside the report directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "out")
			var p Page
			tt.build(&p)
			err := p.WriteDir(dir, tt.page)
			if err == nil {
				t.Fatal("WriteDir succeeded")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("err = %v, want %v", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.mention) {
				t.Errorf("error %q does not mention %q", err, tt.mention)
			}
			if _, statErr := os.Stat(dir); !errors.Is(statErr, os.ErrNotExist) {
				t.Errorf("WriteDir created %s despite failing: %v", dir, statErr)
			}
		})
	}
}
