package buildsteps

import (
	"bytes"
	"strings"
)

// maxLineBytes caps one log line: a command printing megabytes without a
// newline (a progress bar, a minified file) must not become one huge entry.
const maxLineBytes = 4 << 10

// truncatedMark ends a line that was cut at maxLineBytes.
const truncatedMark = " …[line truncated]"

// lineWriter splits a byte stream into lines as it arrives, handing each
// complete line to emit without its newline (and without a carriage return
// before it). A line longer than maxLineBytes is emitted cut, and the rest
// of it up to the next newline is dropped.
type lineWriter struct {
	emit     func(string)
	buf      []byte
	dropping bool // the current line was emitted cut; skip to its end
}

func (w *lineWriter) Write(p []byte) {
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		chunk := p
		if i >= 0 {
			chunk = p[:i]
		}
		if !w.dropping {
			room := maxLineBytes - len(w.buf)
			if len(chunk) > room {
				w.buf = append(w.buf, chunk[:room]...)
				w.emitLine(truncatedMark)
				w.dropping = true
			} else {
				w.buf = append(w.buf, chunk...)
			}
		}
		if i < 0 {
			return
		}
		if !w.dropping {
			w.emitLine("")
		}
		w.dropping = false
		p = p[i+1:]
	}
}

// Flush emits a last line that had no newline.
func (w *lineWriter) Flush() {
	if len(w.buf) > 0 && !w.dropping {
		w.emitLine("")
	}
	w.buf, w.dropping = w.buf[:0], false
}

func (w *lineWriter) emitLine(suffix string) {
	line := strings.TrimSuffix(string(w.buf), "\r")
	// Output is bytes; log entries travel as JSON strings. A cut can also
	// split a multi-byte character.
	w.emit(strings.ToValidUTF8(line, "\uFFFD") + suffix)
	w.buf = w.buf[:0]
}
