package sandbox

import (
	"strings"
	"testing"
)

// FuzzClaimRef checks what every reader of a claim reference relies on: a
// reference that parses names a namespace and a name that build it again
// (NewClaimRef accepts them), and its string parses back to itself.
func FuzzClaimRef(f *testing.F) {
	for _, s := range []string{"ns/name", "default/web-fork-sb-0123", "ns/a_b", "/x", "x/", "a/b/c", "", "NS/Name", "ns/\x00", strings.Repeat("a", 300) + "/b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, ok := ParseClaimRef(s)
		if !ok {
			if !ref.IsZero() {
				t.Fatalf("ParseClaimRef(%q) refused it but returned %+v", s, ref)
			}
			return
		}
		built, err := NewClaimRef(ref.Namespace, ref.Name)
		if err != nil || built != ref {
			t.Fatalf("ParseClaimRef(%q) = %+v, which NewClaimRef refuses or changes: %+v, %v", s, ref, built, err)
		}
		again, ok := ParseClaimRef(ref.String())
		if !ok || again != ref {
			t.Fatalf("ParseClaimRef(%q) = %+v, whose string %q parses to %+v, %v", s, ref, ref.String(), again, ok)
		}
	})
}
