package envd

import "github.com/cocoonstack/sandbox-operator/src/envdtoken"

// DeriveAccessToken is the envd access token of the sandbox whose claim
// token is claimToken; see package envdtoken, which the e2b surface and the
// envd proxy use too.
func DeriveAccessToken(secret []byte, claimToken string) string {
	return envdtoken.Derive(secret, claimToken)
}
