package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"
)

// svgElement is one element of a parsed SVG document, as the tests see it.
type svgElement struct {
	name  string
	attrs map[string]string
	text  string // character data directly inside the element
}

func (e *svgElement) num(t *testing.T, attr string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(e.attrs[attr], 64)
	if err != nil {
		t.Fatalf("<%s %s=%q>: %v", e.name, attr, e.attrs[attr], err)
	}
	return v
}

// svgDoc is a parsed SVG document: its elements in document order.
type svgDoc struct {
	elements []*svgElement
}

// parseSVG parses b strictly, failing the test unless it is one
// well-formed XML document whose root is an SVG <svg> element.
func parseSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(b))
	dec.Strict = true
	var doc svgDoc
	var stack []*svgElement
	roots := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("SVG is not well-formed XML: %v\n%s", err, b)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			if len(stack) == 0 {
				roots++
				if tok.Name.Local != "svg" || tok.Name.Space != svgNamespace {
					t.Fatalf("root element is {%s}%s, want {%s}svg", tok.Name.Space, tok.Name.Local, svgNamespace)
				}
			}
			e := &svgElement{name: tok.Name.Local, attrs: map[string]string{}}
			for _, a := range tok.Attr {
				e.attrs[a.Name.Local] = a.Value
			}
			doc.elements = append(doc.elements, e)
			stack = append(stack, e)
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		case xml.CharData:
			if len(stack) > 0 {
				stack[len(stack)-1].text += string(tok)
			}
		}
	}
	if roots != 1 {
		t.Fatalf("document has %d root elements, want 1", roots)
	}
	return doc
}

// find returns the elements with the given name and class ("" matches any
// class).
func (d svgDoc) find(name, class string) []*svgElement {
	var out []*svgElement
	for _, e := range d.elements {
		if e.name == name && (class == "" || e.attrs["class"] == class) {
			out = append(out, e)
		}
	}
	return out
}

// texts returns the content of every <text> element with the given class.
func (d svgDoc) texts(class string) []string {
	var out []string
	for _, e := range d.find("text", class) {
		out = append(out, e.text)
	}
	return out
}

func (d svgDoc) hasText(s string) bool {
	for _, e := range d.find("text", "") {
		if e.text == s {
			return true
		}
	}
	return false
}

// plotRect is the plot area's bounds, read from the document itself.
type plotRect struct{ left, top, right, bottom float64 }

func (d svgDoc) plotArea(t *testing.T) plotRect {
	t.Helper()
	areas := d.find("rect", "plot-area")
	if len(areas) != 1 {
		t.Fatalf("found %d plot-area rects, want 1", len(areas))
	}
	a := areas[0]
	x, y := a.num(t, "x"), a.num(t, "y")
	return plotRect{left: x, top: y, right: x + a.num(t, "width"), bottom: y + a.num(t, "height")}
}

// contains allows for the two-decimal rounding of coordinates.
func (r plotRect) contains(x, y float64) bool {
	const slack = 0.01
	return x >= r.left-slack && x <= r.right+slack && y >= r.top-slack && y <= r.bottom+slack
}

// checkRoot verifies the root element's size attributes.
func checkRoot(t *testing.T, d svgDoc) {
	t.Helper()
	root := d.elements[0]
	w, h := root.num(t, "width"), root.num(t, "height")
	if w <= 0 || h <= 0 {
		t.Errorf("svg size %gx%g, want positive", w, h)
	}
	if want := "0 0 " + px(w) + " " + px(h); root.attrs["viewBox"] != want {
		t.Errorf("viewBox = %q, want %q", root.attrs["viewBox"], want)
	}
	bg := d.find("rect", "background")
	if len(bg) != 1 || bg[0].attrs["fill"] != "#ffffff" {
		t.Errorf("want one white background rect, got %d", len(bg))
	}
}

// parsePoints parses a polyline's "x,y x,y ..." points attribute.
func parsePoints(t *testing.T, s string) [][2]float64 {
	t.Helper()
	var out [][2]float64
	for _, pair := range strings.Fields(s) {
		xs, ys, ok := strings.Cut(pair, ",")
		if !ok {
			t.Fatalf("bad point %q in %q", pair, s)
		}
		x, err1 := strconv.ParseFloat(xs, 64)
		y, err2 := strconv.ParseFloat(ys, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("bad point %q in %q", pair, s)
		}
		out = append(out, [2]float64{x, y})
	}
	return out
}
