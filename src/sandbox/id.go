// Package sandboxid converts between the two spellings of a sandboxd claim
// id.
//
// sandboxd names a claim "sb_" followed by its body ("sb_0123abcd"). An
// underscore is not allowed in a DNS label, so every surface that puts the
// id into a host name (the e2b API and its data-plane hosts
// "{port}-{sandboxID}.{domain}") shows it as "sb-0123abcd" instead. The two
// spellings differ only in that separator; the body is the same bytes.
//
// Only the prefix is rewritten, which makes the mapping a bijection between
// well-formed ids: Canonical(DNS(id)) == id and DNS(Canonical(s)) == s.
package sandboxid

import "strings"

const (
	// Prefix starts an id as sandboxd writes it.
	Prefix = "sb_"
	// DNSPrefix starts the DNS-safe spelling of the same id.
	DNSPrefix = "sb-"

	// MaxLen bounds an id in either spelling: the DNS spelling must fit in
	// one DNS label, and that bound also keeps hostile input short.
	MaxLen = 63
)

// Valid reports whether s is an id in either spelling: a known prefix, then
// a non-empty body of ASCII letters, digits and hyphens, at most MaxLen
// bytes in all. The body never holds an underscore, so the DNS spelling
// stays a valid label.
func Valid(s string) bool {
	if len(s) > MaxLen || len(s) <= len(Prefix) {
		return false
	}
	if !strings.HasPrefix(s, Prefix) && !strings.HasPrefix(s, DNSPrefix) {
		return false
	}
	body := s[len(Prefix):]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Canonical returns the sandboxd spelling ("sb_…") of an id given in either
// spelling, and false when s is not a valid id.
func Canonical(s string) (string, bool) {
	if !Valid(s) {
		return "", false
	}
	if strings.HasPrefix(s, Prefix) {
		return s, true
	}
	return Prefix + s[len(DNSPrefix):], true
}

// DNS returns the DNS-safe spelling ("sb-…") of an id given in either
// spelling, and false when s is not a valid id.
func DNS(s string) (string, bool) {
	if !Valid(s) {
		return "", false
	}
	if strings.HasPrefix(s, DNSPrefix) {
		return s, true
	}
	return DNSPrefix + s[len(Prefix):], true
}

// Equal reports whether a and b name the same id, in whichever spellings.
func Equal(a, b string) bool {
	ca, ok := Canonical(a)
	if !ok {
		return false
	}
	cb, ok := Canonical(b)
	return ok && ca == cb
}
