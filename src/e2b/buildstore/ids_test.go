package buildstore

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckIDs(t *testing.T) {
	good := hashOf("x")
	for _, tc := range []struct {
		name, id, hash string
		ok             bool
	}{
		{"plain", "abc123", good, true},
		{"dash and underscore", "a-b_c", good, true},
		{"longest id", strings.Repeat("a", 64), good, true},
		{"empty id", "", good, false},
		{"id too long", strings.Repeat("a", 65), good, false},
		{"upper case id", "Abc", good, false},
		{"dot dot", "..", good, false},
		{"dot", "a.b", good, false},
		{"slash", "a/b", good, false},
		{"backslash", `a\b`, good, false},
		{"nul", "a\x00b", good, false},
		{"space", "a b", good, false},
		{"short hash", "abc", good[:63], false},
		{"long hash", "abc", good + "0", false},
		{"upper case hash", "abc", strings.ToUpper(good), false},
		{"non-hex hash", "abc", "g" + good[1:], false},
		{"path hash", "abc", "../" + good[3:], false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkIDs(tc.id, tc.hash)
			if tc.ok != (err == nil) {
				t.Fatalf("checkIDs(%q, %q) = %v, want ok=%v", tc.id, tc.hash, err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalid", err)
			}
		})
	}
}
