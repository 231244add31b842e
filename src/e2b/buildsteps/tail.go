package buildsteps

import "strings"

// Bounds of the output a failing step's message quotes: enough to show the
// error a command printed last, small enough for one message.
const (
	tailLines = 20
	tailBytes = 4 << 10
)

// tail keeps the last lines of a command's output, both streams
// interleaved as they arrived.
type tail struct {
	lines []string
}

func (t *tail) add(line string) {
	t.lines = append(t.lines, line)
	if len(t.lines) > tailLines {
		t.lines = t.lines[len(t.lines)-tailLines:]
	}
}

// String is the kept lines, the oldest dropped first until they fit
// tailBytes.
func (t *tail) String() string {
	lines, size := t.lines, 0
	for i := len(lines) - 1; i >= 0; i-- {
		size += len(lines[i]) + 1
		if size > tailBytes {
			lines = lines[i+1:]
			break
		}
	}
	return strings.Join(lines, "\n")
}
