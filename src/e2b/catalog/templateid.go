package catalog

import (
	"errors"
	"fmt"
	"strings"
)

// maxTemplateIDBytes bounds a template id or alias. An e2b id or alias is
// a short name (e2b's own are 20 characters; an alias with a team
// namespace and a tag stays well under 100), and an id that is not an
// alias names a pool image, whose name a registry caps at 255 characters.
const maxTemplateIDBytes = 255

// ValidTemplateID refuses a template id, alias or pool image that cannot
// name a template, before it reaches a node (which would store it, and
// echo it in every list). e2b's template ids and aliases are lowercase
// letters, digits, '-' and '_', optionally 'team/alias' and ':tag'; an id
// that is no alias is a pool image reference, which adds upper case,
// '.', ':' (registry port, tag) and '@' (digest). The accepted set is the
// union of both, starting with a letter or digit, without an empty or
// dot-dot path element: nothing that reads as a path, a control
// character or whitespace gets through. The error says what is wrong
// without repeating the id, which may be huge; callers name the field.
func ValidTemplateID(id string) error {
	switch {
	case id == "":
		return errors.New("it is empty")
	case len(id) > maxTemplateIDBytes:
		return fmt.Errorf("it is longer than %d bytes", maxTemplateIDBytes)
	case !isAlnum(id[0]):
		return errors.New("it must start with a letter or a digit")
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; !isAlnum(c) && !strings.ContainsRune("-_./:@", rune(c)) {
			// The byte goes out escaped: it may be a control character.
			return fmt.Errorf("it contains %q: only letters, digits and - _ . / : @ are allowed", id[i:i+1])
		}
	}
	if strings.Contains(id, "//") || strings.Contains(id, "..") || strings.HasSuffix(id, "/") {
		return errors.New("it must not contain '//' or '..', nor end with '/'")
	}
	return nil
}

func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
