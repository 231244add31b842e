package node

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// decodeMetadata reads the metadata field of a claim or checkpoint claim
// body (absent or null: none). The rules are sandboxd.ValidateMetadata's,
// the one implementation the fronts use too. Only the UTF-8 check also
// looks at the bytes as sent: encoding/json decodes invalid UTF-8 and a
// lone surrogate escape ("\ud800") to U+FFFD, which would let a value
// sandboxd refuses pass here as another one.
func decodeMetadata(raw json.RawMessage) (map[string]string, *apiError) {
	if len(raw) == 0 {
		return nil, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return nil, errorf(http.StatusBadRequest, "metadata must be an object of strings")
	}
	m := make(map[string]string, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		v := fields[k]
		if len(v) == 0 || v[0] != '"' { // null, a number, an object…
			return nil, errorf(http.StatusBadRequest, "metadata value of %.128q: not a string", k)
		}
		if !utf8.Valid(v) || hasLoneSurrogate(v) {
			return nil, errorf(http.StatusBadRequest, "metadata value of %.128q: not valid UTF-8", k)
		}
		var s string
		if err := json.Unmarshal(v, &s); err != nil {
			return nil, errorf(http.StatusBadRequest, "metadata value of %.128q: not a string", k)
		}
		m[k] = s
	}
	if err := sandboxd.ValidateMetadata(m); err != nil {
		return nil, errorf(http.StatusBadRequest, "%s", err)
	}
	if len(m) == 0 {
		return nil, nil // rows omit empty metadata
	}
	return m, nil
}

// hasLoneSurrogate reports whether a JSON string (as sent, already
// syntax-checked) escapes half of a UTF-16 surrogate pair without the
// other half right behind it: that names no character, so the value has
// no UTF-8 spelling.
func hasLoneSurrogate(s []byte) bool {
	high := false // the previous escape was a high surrogate
	for i := 0; i < len(s); i++ {
		r := rune(-1) // not a \u escape
		if s[i] == '\\' && i+1 < len(s) {
			if s[i+1] == 'u' && i+6 <= len(s) {
				n, err := strconv.ParseUint(string(s[i+2:i+6]), 16, 16)
				if err != nil {
					return true // not JSON; the body parsed, so never reached
				}
				r = rune(n)
				i += 5
			} else {
				i++ // \" \\ \/ \b \f \n \r \t
			}
		}
		switch {
		case utf16.IsSurrogate(r) && r < 0xdc00:
			if high {
				return true
			}
			high = true
		case utf16.IsSurrogate(r):
			if !high {
				return true
			}
			high = false
		case high:
			return true
		}
	}
	return high
}

// metadataFilter reads the index's ?metadata=key=value pairs, which may
// repeat; a claim is listed when it holds every pair. The value is what
// follows the first '=' (keys never hold one) and may be empty, matching a
// label whose value is "".
func metadataFilter(q url.Values) (map[string]string, *apiError) {
	pairs := q["metadata"]
	if len(pairs) == 0 {
		return nil, nil
	}
	want := make(map[string]string, len(pairs))
	for _, p := range pairs {
		k, v, ok := strings.Cut(p, "=")
		if !ok {
			return nil, errorf(http.StatusBadRequest, "metadata filter %q: want key=value", p)
		}
		if k == "" {
			return nil, errorf(http.StatusBadRequest, "metadata filter %q: empty key", p)
		}
		if _, dup := want[k]; dup {
			return nil, errorf(http.StatusBadRequest, "metadata filter: key %q repeated", k)
		}
		want[k] = v
	}
	return want, nil
}

// holdsMetadata reports whether labels carry every pair of want.
func holdsMetadata(labels, want map[string]string) bool {
	for k, v := range want {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}
