package envdtoken

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
)

// MaxSecretBytes bounds the secret file; a larger file is a mistake
// (a wrong path, a certificate bundle), not a secret.
const MaxSecretBytes = 64 << 10

// Derive returns the envd access token of the sandbox whose claim token is
// claimToken: hex(HMAC-SHA256(secret, claimToken)).
func Derive(secret []byte, claimToken string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(claimToken))
	return hex.EncodeToString(mac.Sum(nil))
}

// Equal compares a presented access token with the derived one in constant
// time, so a caller cannot learn a prefix from response timing.
func Equal(presented, derived string) bool {
	return subtle.ConstantTimeCompare([]byte(presented), []byte(derived)) == 1
}

// ReadSecretFile reads the envd secret. Surrounding whitespace is trimmed,
// so a Secret written with a trailing newline derives the same tokens as
// one without; every binary of a deployment must read the file this way.
// An empty or oversized file is an error naming the path.
func ReadSecretFile(path string) ([]byte, error) {
	if path == "" {
		return nil, errors.New("envd secret file: no path given")
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("envd secret file: %w", err)
	}
	defer f.Close()
	buf, err := io.ReadAll(io.LimitReader(f, MaxSecretBytes+1))
	if err != nil {
		return nil, fmt.Errorf("envd secret file %s: %w", path, err)
	}
	if len(buf) > MaxSecretBytes {
		return nil, fmt.Errorf("envd secret file %s: larger than %d bytes", path, MaxSecretBytes)
	}
	secret := bytes.TrimSpace(buf)
	if len(secret) == 0 {
		return nil, fmt.Errorf("envd secret file %s: empty", path)
	}
	return secret, nil
}
