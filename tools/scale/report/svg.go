package report

import (
	"bytes"
	"encoding/xml"
	"math"
	"strconv"
	"strings"
)

const svgNamespace = "http://www.w3.org/2000/svg"

// attr is one XML attribute. Elements take attributes as an ordered list,
// not a map, so the output is byte-for-byte deterministic.
type attr struct {
	name, value string
}

// svgWriter accumulates one SVG document, one element per line. Every
// attribute value and text node passes through escapeXML, so caller-supplied
// titles and names cannot break the document.
type svgWriter struct {
	buf bytes.Buffer
}

// newSVG starts a document of the given pixel size with a white background,
// so the plot stays readable on dark-themed viewers.
func newSVG(width, height float64) *svgWriter {
	w := &svgWriter{}
	w.buf.WriteString(`<?xml version="1.0" encoding="UTF-8"?>` + "\n")
	w.open("svg",
		attr{"xmlns", svgNamespace},
		attr{"width", px(width)},
		attr{"height", px(height)},
		attr{"viewBox", "0 0 " + px(width) + " " + px(height)},
		attr{"font-family", "sans-serif"},
		attr{"font-size", px(fontSize)},
	)
	w.leaf("rect",
		attr{"class", "background"},
		attr{"x", "0"}, attr{"y", "0"},
		attr{"width", px(width)}, attr{"height", px(height)},
		attr{"fill", "#ffffff"},
	)
	return w
}

// finish closes the root element and returns the document.
func (w *svgWriter) finish() []byte {
	w.close("svg")
	return w.buf.Bytes()
}

// open writes a start tag; the caller closes it with close.
func (w *svgWriter) open(name string, attrs ...attr) {
	w.startTag(name, attrs)
	w.buf.WriteString(">\n")
}

// close writes an end tag.
func (w *svgWriter) close(name string) {
	w.buf.WriteString("</" + name + ">\n")
}

// leaf writes an element without content.
func (w *svgWriter) leaf(name string, attrs ...attr) {
	w.startTag(name, attrs)
	w.buf.WriteString("/>\n")
}

// textElem writes an element whose only content is escaped text, such as
// <text> or a <title> tooltip.
func (w *svgWriter) textElem(name, content string, attrs ...attr) {
	w.startTag(name, attrs)
	w.buf.WriteByte('>')
	w.buf.WriteString(escapeXML(content))
	w.buf.WriteString("</" + name + ">\n")
}

func (w *svgWriter) startTag(name string, attrs []attr) {
	w.buf.WriteString("<" + name)
	for _, a := range attrs {
		w.buf.WriteString(" " + a.name + `="` + escapeXML(a.value) + `"`)
	}
}

// escapeXML makes s safe as XML text or a double-quoted attribute value.
// encoding/xml also replaces characters XML forbids (most control
// characters) with U+FFFD, which plain string replacement would miss.
func escapeXML(s string) string {
	var b bytes.Buffer
	// Writing to a bytes.Buffer cannot fail, so the error is always nil.
	_ = xml.EscapeText(&b, []byte(s))
	return b.String()
}

// px formats a pixel coordinate. Two decimals are finer than any screen
// resolves and keep the file small and stable across platforms.
func px(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	s = strings.TrimRight(s, "0")
	s = strings.TrimSuffix(s, ".")
	if s == "-0" {
		return "0"
	}
	return s
}

// roundPx rounds v to the precision px writes, for values that are
// combined after rounding and must still meet exactly.
func roundPx(v float64) float64 {
	return math.Round(v*100) / 100
}

// exact formats a data value in full for tooltips, where the reader wants
// the measured number rather than a rounded axis label.
func exact(v float64) string {
	return strconv.FormatFloat(v, 'g', -1, 64)
}
