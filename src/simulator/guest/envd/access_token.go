package envd

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// DeriveAccessToken is the envd access token of the sandbox whose claim
// token is claimToken: hex(HMAC-SHA256(secret, claimToken)). The e2b
// surface hands this value to the SDK and the envd proxy recomputes it, so
// a guest configured with it accepts exactly the callers the control plane
// admitted, without the control plane storing any per-sandbox token.
func DeriveAccessToken(secret []byte, claimToken string) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write([]byte(claimToken))
	return hex.EncodeToString(mac.Sum(nil))
}
