package buildstore

import "fmt"

const (
	maxTemplateIDLen = 64
	hashLen          = 64
)

// checkTemplateID refuses a template id that could read as anything but
// one path element or key segment: no '.', '/' or other punctuation. The
// id is not echoed, as it may be huge or hold control characters.
func checkTemplateID(id string) error {
	if id == "" || len(id) > maxTemplateIDLen {
		return fmt.Errorf("%w: a template id is 1-%d characters", ErrInvalid, maxTemplateIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !isLowerHex(c) && !('g' <= c && c <= 'z') && c != '-' && c != '_' {
			return fmt.Errorf("%w: a template id is lowercase letters, digits, '-' and '_'", ErrInvalid)
		}
	}
	return nil
}

// checkHash refuses anything but the lowercase hex SHA-256 the SDK sends.
func checkHash(hash string) error {
	if len(hash) != hashLen {
		return fmt.Errorf("%w: a files hash is %d lowercase hex digits", ErrInvalid, hashLen)
	}
	for i := 0; i < len(hash); i++ {
		if !isLowerHex(hash[i]) {
			return fmt.Errorf("%w: a files hash is %d lowercase hex digits", ErrInvalid, hashLen)
		}
	}
	return nil
}

func checkIDs(templateID, hash string) error {
	if err := checkTemplateID(templateID); err != nil {
		return err
	}
	return checkHash(hash)
}

func isLowerHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f'
}
