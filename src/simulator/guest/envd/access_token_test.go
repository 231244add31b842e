package envd

import "testing"

// The vector is RFC 4231 test case 2 (key "Jefe"), so the derivation is
// pinned to HMAC-SHA256 in lower-case hex, not just to itself.
func TestDeriveAccessToken(t *testing.T) {
	got := DeriveAccessToken([]byte("Jefe"), "what do ya want for nothing?")
	const want = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got != want {
		t.Fatalf("DeriveAccessToken = %s, want %s", got, want)
	}
	if DeriveAccessToken([]byte("Jefe"), "other claim token") == want {
		t.Fatal("different claim tokens derived the same access token")
	}
}
