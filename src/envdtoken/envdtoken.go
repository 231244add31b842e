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

// trafficLabel keys a traffic token's derivation apart from any other use
// of the access token.
const trafficLabel = "e2b-traffic-access-token"

// Traffic returns the sandbox's e2b traffic access token (the
// E2B-Traffic-Access-Token header) from its envd access token:
// hex(HMAC-SHA256(accessToken, "e2b-traffic-access-token")). e2b's SDKs
// send it, and not the envd token, on some calls to a sandbox's other
// ports (@e2b/code-interpreter's contexts); deriving it from the access
// token lets the data plane and the guest, which both hold that token,
// check it with nothing more stored. It never yields the access token.
func Traffic(accessToken string) string {
	mac := hmac.New(sha256.New, []byte(accessToken))
	mac.Write([]byte(trafficLabel))
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
