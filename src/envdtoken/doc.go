// Package envdtoken derives and checks the envd access token of a sandbox.
//
// The e2b surface hands each sandbox's envd access token to the SDK, and the
// envd proxy recomputes it to authorize data-plane requests. Neither stores
// it: the token is hex(HMAC-SHA256(secret, claim token)), where the claim
// token is the sandbox's own sandboxd token (readable from the owning node
// with the root token) and the secret is one file every binary of a
// deployment reads. A caller who holds the access token cannot recover the
// claim token from it, so the claim token never has to leave the control
// plane.
package envdtoken
