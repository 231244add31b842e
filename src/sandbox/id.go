// Sandbox ids.
//
// sandboxd names a claim "sb_" followed by its body ("sb_0123abcd"). An
// underscore is not allowed in a DNS label, so every surface that puts the
// id into a host name (the e2b API and its data-plane hosts
// "{port}-{sandboxID}.{domain}") shows it as "sb-0123abcd" instead. The two
// spellings differ only in that separator; the body is the same bytes.
//
// Only the prefix is rewritten, which makes the mapping a bijection between
// well-formed ids: CanonicalID(DNSID(id)) == id and DNSID(CanonicalID(s)) == s.

package sandbox

import "strings"

const (
	// IDPrefix starts an id as sandboxd writes it.
	IDPrefix = "sb_"
	// DNSIDPrefix starts the DNS-safe spelling of the same id.
	DNSIDPrefix = "sb-"

	// MaxIDLen bounds an id in either spelling: the DNS spelling must fit in
	// one DNS label, and that bound also keeps hostile input short.
	MaxIDLen = 63
)

// ValidID reports whether s is an id in either spelling: a known prefix, then
// a non-empty body of ASCII letters, digits and hyphens, at most MaxIDLen
// bytes in all. The body never holds an underscore, so the DNS spelling
// stays a valid label.
func ValidID(s string) bool {
	if len(s) > MaxIDLen || len(s) <= len(IDPrefix) {
		return false
	}
	if !strings.HasPrefix(s, IDPrefix) && !strings.HasPrefix(s, DNSIDPrefix) {
		return false
	}
	body := s[len(IDPrefix):]
	for i := 0; i < len(body); i++ {
		c := body[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// CanonicalID returns the sandboxd spelling ("sb_…") of an id given in either
// spelling, and false when s is not a valid id.
func CanonicalID(s string) (string, bool) {
	if !ValidID(s) {
		return "", false
	}
	if strings.HasPrefix(s, IDPrefix) {
		return s, true
	}
	return IDPrefix + s[len(DNSIDPrefix):], true
}

// DNSID returns the DNS-safe spelling ("sb-…") of an id given in either
// spelling, and false when s is not a valid id.
func DNSID(s string) (string, bool) {
	if !ValidID(s) {
		return "", false
	}
	if strings.HasPrefix(s, DNSIDPrefix) {
		return s, true
	}
	return DNSIDPrefix + s[len(IDPrefix):], true
}

// SameID reports whether a and b name the same id, in whichever spellings.
func SameID(a, b string) bool {
	ca, ok := CanonicalID(a)
	if !ok {
		return false
	}
	cb, ok := CanonicalID(b)
	return ok && ca == cb
}
