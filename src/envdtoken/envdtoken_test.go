package envdtoken

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDeriveIsHexHMAC(t *testing.T) {
	// RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
	got := Derive([]byte("Jefe"), "what do ya want for nothing?")
	want := "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
	if got != want {
		t.Fatalf("Derive = %s, want %s", got, want)
	}
	mac := hmac.New(sha256.New, []byte("s"))
	mac.Write([]byte("claim"))
	if Derive([]byte("s"), "claim") != hex.EncodeToString(mac.Sum(nil)) {
		t.Fatal("Derive disagrees with HMAC-SHA256")
	}
	if Derive([]byte("s"), "claim") == Derive([]byte("t"), "claim") {
		t.Fatal("different secrets derived the same token")
	}
}

func TestEqual(t *testing.T) {
	tok := Derive([]byte("s"), "c")
	if !Equal(tok, tok) {
		t.Fatal("equal tokens compared unequal")
	}
	for _, bad := range []string{"", tok[:len(tok)-1], strings.ToUpper(tok), tok + "0"} {
		if Equal(bad, tok) {
			t.Fatalf("Equal(%q) = true", bad)
		}
	}
}

func TestReadSecretFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	got, err := ReadSecretFile(write("nl", "  s3cret\n"))
	if err != nil || string(got) != "s3cret" {
		t.Fatalf("ReadSecretFile = %q, %v; want trimmed s3cret", got, err)
	}
	cases := map[string]string{
		"":                         "no path",
		write("empty", " \n\t"):    "empty",
		filepath.Join(dir, "none"): "no such file",
		write("big", strings.Repeat("x", MaxSecretBytes+1)): "larger than",
	}
	for path, want := range cases {
		if _, err := ReadSecretFile(path); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadSecretFile(%q) error = %v, want it to mention %q", path, err, want)
		}
	}
}

// The traffic token is its own HMAC of the access token: stable, distinct
// from the access token, and different for another sandbox's.
func TestTraffic(t *testing.T) {
	a, b := Derive([]byte("s"), "claim-a"), Derive([]byte("s"), "claim-b")
	ta := Traffic(a)
	if len(ta) != 64 || strings.Trim(ta, "0123456789abcdef") != "" {
		t.Fatalf("traffic token %q is not 64 hex digits", ta)
	}
	if ta != Traffic(a) || ta == a || ta == Traffic(b) {
		t.Fatal("the traffic token must be stable, differ from the access token, and differ per sandbox")
	}
}
