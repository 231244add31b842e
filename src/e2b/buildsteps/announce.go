package buildsteps

import "strings"

// announce is the line that opens a step in the log, Dockerfile-like:
// "[3] RUN echo hi". ENV shows the names only: values are often keys or
// passwords, and the log is shown to whoever may read the build.
func announce(name string, s Step) string {
	var b strings.Builder
	b.WriteString("[" + name + "] " + s.Type)
	switch s.Type {
	case TypeRun:
		b.WriteString(" " + s.Args[0])
		if len(s.Args) > 1 && s.Args[1] != "" {
			b.WriteString(" (as " + s.Args[1] + ")")
		}
	case TypeCopy:
		if len(s.Args) > 2 && s.Args[2] != "" {
			b.WriteString(" --chown=" + s.Args[2])
		}
		if len(s.Args) > 3 && s.Args[3] != "" {
			b.WriteString(" --chmod=" + s.Args[3])
		}
		b.WriteString(" " + s.Args[0] + " " + s.Args[1])
	case TypeEnv:
		for i := 0; i < len(s.Args); i += 2 {
			b.WriteString(" " + s.Args[i])
		}
	default:
		b.WriteString(" " + s.Args[0])
	}
	return capLine(b.String())
}

// capLine bounds a line the runner writes itself as lineWriter bounds a
// command's.
func capLine(s string) string {
	if len(s) > maxLineBytes {
		s = s[:maxLineBytes] + truncatedMark
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
