package report

import (
	"bytes"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Page builds a Markdown document. Blocks are separated by one blank line
// in the order they are added. The zero value is an empty page ready to use.
type Page struct {
	buf    bytes.Buffer
	charts []outputFile
	// err is the first AddChart failure. AddChart has no error result so
	// a report can be assembled without checks at every step; WriteDir
	// reports it before writing anything.
	err error
}

// outputFile is a file WriteDir writes: a chart rendered by AddChart, or
// the page itself.
type outputFile struct {
	file    string // slash-separated, relative to the page's directory
	content []byte
}

// block appends one Markdown block, ending in a newline, with a blank line
// before it unless it is the first.
func (p *Page) block(text string) {
	if p.buf.Len() > 0 {
		p.buf.WriteByte('\n')
	}
	p.buf.WriteString(text)
	if !strings.HasSuffix(text, "\n") {
		p.buf.WriteByte('\n')
	}
}

// Heading adds an ATX heading. level is clamped to Markdown's 1..6, and
// line breaks in text become spaces because a heading is a single line.
func (p *Page) Heading(level int, text string) {
	level = max(1, min(level, 6))
	p.block(strings.Repeat("#", level) + " " + oneLine(text, " "))
}

// Para adds a paragraph; text is written as is, so it may carry inline
// Markdown.
func (p *Page) Para(text string) {
	p.block(text)
}

// Table adds a GitHub-flavoured table. Pipes and newlines in cells are
// escaped so a cell cannot split into columns or end the table. Rows
// shorter than the widest row or header are padded with empty cells, and a
// row longer than the header widens the table, so no value is dropped.
func (p *Page) Table(header []string, rows [][]string) {
	columns := len(header)
	for _, r := range rows {
		columns = max(columns, len(r))
	}
	if columns == 0 {
		return
	}
	var b strings.Builder
	writeRow := func(cells []string) {
		b.WriteString("|")
		for i := range columns {
			cell := ""
			if i < len(cells) {
				cell = tableCell(cells[i])
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
	writeRow(header)
	b.WriteString(strings.Repeat("| --- ", columns) + "|\n")
	for _, r := range rows {
		writeRow(r)
	}
	p.block(b.String())
}

// tableCell escapes a table cell: a pipe would start a new column and a
// line break would end the row, so they become \| and <br>.
func tableCell(s string) string {
	return oneLine(strings.ReplaceAll(s, "|", `\|`), "<br>")
}

// oneLine replaces every line break (\r\n, \n or \r) in s with sep.
func oneLine(s, sep string) string {
	return strings.NewReplacer("\r\n", sep, "\n", sep, "\r", sep).Replace(s)
}

// Image adds an image line, ![alt](relPath).
func (p *Page) Image(alt, relPath string) {
	p.block(imageLine(alt, relPath))
}

// imageLine escapes what would otherwise end the alt text or the link
// early: brackets and line breaks in alt, and spaces or parentheses in the
// path, which CommonMark allows only inside <...>.
func imageLine(alt, relPath string) string {
	alt = strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`).Replace(oneLine(alt, " "))
	dest := oneLine(relPath, "")
	if strings.ContainsAny(dest, " ()<>") {
		dest = "<" + strings.NewReplacer(`\`, `\\`, "<", `\<`, ">", `\>`).Replace(dest) + ">"
	}
	return "![" + alt + "](" + dest + ")"
}

// Code adds a fenced code block. The fence is longer than any run of the
// fence character inside text, so text cannot close the block early; it
// uses tildes when the info string holds a backtick, which backtick fences
// forbid.
func (p *Page) Code(lang, text string) {
	lang = oneLine(lang, " ")
	mark := "`"
	if strings.Contains(lang, "`") {
		mark = "~"
	}
	fence := strings.Repeat(mark, max(3, longestRun(text, mark[0])+1))
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	p.block(fence + lang + "\n" + text + fence)
}

// longestRun returns the length of the longest run of c in s.
func longestRun(s string, c byte) int {
	longest, run := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == c {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	return longest
}

// Bytes returns the Markdown text of the page so far.
func (p *Page) Bytes() []byte {
	return bytes.Clone(p.buf.Bytes())
}

// AddChart renders chart to be written as file (a slash-separated path
// relative to the page) by WriteDir, and adds its image line at this point
// in the page. The chart is rendered now, so later changes to the slices it
// holds do not alter the report; a render error is kept and returned by
// WriteDir.
func (p *Page) AddChart(file, alt string, chart interface{ SVG() ([]byte, error) }) {
	p.Image(alt, file)
	if p.err != nil {
		return
	}
	if chart == nil {
		p.err = fmt.Errorf("report: chart %q: %w", file, errNilChart)
		return
	}
	if err := checkRelPath(file); err != nil {
		p.err = fmt.Errorf("report: chart %w", err)
		return
	}
	for _, c := range p.charts {
		if path.Clean(c.file) == path.Clean(file) {
			p.err = fmt.Errorf("report: chart file %q added twice", file)
			return
		}
	}
	svg, err := chart.SVG()
	if err != nil {
		p.err = fmt.Errorf("report: chart %q: %w", file, err)
		return
	}
	p.charts = append(p.charts, outputFile{file: file, content: svg})
}

// checkRelPath rejects a file name that would land outside the page's
// directory, so a report can never overwrite files elsewhere.
func checkRelPath(file string) error {
	if file == "" || !filepath.IsLocal(filepath.FromSlash(file)) {
		return fmt.Errorf("file %q: must be a relative path inside the report directory", file)
	}
	return nil
}

// WriteDir writes the page as dir/name and every chart added with AddChart
// as dir/<file>; it creates dir (and any subdirectories the files name).
// Nothing is written if a chart failed to render.
func (p *Page) WriteDir(dir, name string) error {
	if p.err != nil {
		return p.err
	}
	if err := checkRelPath(name); err != nil {
		return fmt.Errorf("report: page %w", err)
	}
	for _, c := range p.charts {
		if path.Clean(c.file) == path.Clean(filepath.ToSlash(name)) {
			return fmt.Errorf("report: chart file %q would overwrite the page", c.file)
		}
	}
	// Charts first, page last: a page on disk then never links to a chart
	// that failed to be written.
	files := append([]outputFile(nil), p.charts...)
	files = append(files, outputFile{file: filepath.ToSlash(name), content: p.buf.Bytes()})
	for _, f := range files {
		target := filepath.Join(dir, filepath.FromSlash(f.file))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return fmt.Errorf("report: %w", err)
		}
		if err := os.WriteFile(target, f.content, 0o644); err != nil {
			return fmt.Errorf("report: %w", err)
		}
	}
	return nil
}
