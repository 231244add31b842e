package buildsteps

import "strings"

// shQuote quotes s as one word for a POSIX shell. Inside single quotes
// every byte is literal ($, `, \, spaces, newlines), so only the single
// quote itself needs care: it closes the quoting, appears escaped, and the
// quoting reopens.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
