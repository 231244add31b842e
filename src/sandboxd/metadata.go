package sandboxd

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Bounds on a claim's metadata labels, as sandboxd enforces them.
const (
	// MaxMetadataPairs is how many labels one claim may carry.
	MaxMetadataPairs = 16
	// MaxMetadataKeyBytes bounds a key; a key is 1 to this many bytes.
	MaxMetadataKeyBytes = 128
	// MaxMetadataValueBytes bounds a value; an empty value is allowed.
	MaxMetadataValueBytes = 512
	// MaxMetadataJSONBytes bounds the whole map encoded as compact JSON.
	MaxMetadataJSONBytes = 4096
)

// ValidateMetadata checks claim metadata against sandboxd's rules, so a
// caller can refuse bad labels before any node sees them:
//
//   - at most MaxMetadataPairs pairs;
//   - each key 1 to MaxMetadataKeyBytes bytes of printable ASCII (space
//     to '~') without '=' or '&', which the index filter
//     (?metadata=key=value) uses as separators;
//   - each value at most MaxMetadataValueBytes bytes of valid UTF-8
//     without control characters;
//   - at most MaxMetadataJSONBytes for the map as compact JSON, where a
//     quote or a backslash takes two bytes (its escape).
//
// A nil or empty map is valid. The error names the bound broken and the
// key at fault, never a value; keys are checked in sorted order, so a map
// breaking several rules always reports the same one.
func ValidateMetadata(m map[string]string) error {
	if len(m) > MaxMetadataPairs {
		return fmt.Errorf("metadata: %d pairs, at most %d", len(m), MaxMetadataPairs)
	}
	size := 2 // {}
	for i, k := range slices.Sorted(maps.Keys(m)) {
		if err := validMetadataKey(k); err != nil {
			return err
		}
		v := m[k]
		if err := validMetadataValue(k, v); err != nil {
			return err
		}
		if i > 0 {
			size++ // ,
		}
		size += jsonStringLen(k) + 1 + jsonStringLen(v)
	}
	if size > MaxMetadataJSONBytes {
		return fmt.Errorf("metadata: %d bytes as JSON, at most %d", size, MaxMetadataJSONBytes)
	}
	return nil
}

func validMetadataKey(k string) error {
	if k == "" {
		return errors.New("metadata: empty key")
	}
	if len(k) > MaxMetadataKeyBytes {
		return fmt.Errorf("metadata key %.32q…: %d bytes, at most %d", k, len(k), MaxMetadataKeyBytes)
	}
	for i := range len(k) {
		switch b := k[i]; {
		case b == '=' || b == '&':
			return fmt.Errorf("metadata key %q: %q is not allowed in a key", k, b)
		case b < ' ' || b > '~':
			return fmt.Errorf("metadata key %q: byte 0x%02x is not printable ASCII", k, b)
		}
	}
	return nil
}

func validMetadataValue(k, v string) error {
	if len(v) > MaxMetadataValueBytes {
		return fmt.Errorf("metadata value of %q: %d bytes, at most %d", k, len(v), MaxMetadataValueBytes)
	}
	if !utf8.ValidString(v) {
		return fmt.Errorf("metadata value of %q: not valid UTF-8", k)
	}
	for _, r := range v {
		if unicode.IsControl(r) {
			return fmt.Errorf("metadata value of %q: control character %U", k, r)
		}
	}
	return nil
}

// jsonStringLen is the length of s as a JSON string once it passed the
// checks above: quotes around it, and a second byte for each quote or
// backslash it holds (control characters, which would take six, are
// refused before).
func jsonStringLen(s string) int {
	return len(s) + 2 + strings.Count(s, `"`) + strings.Count(s, `\`)
}
