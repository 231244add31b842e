package sandbox

import (
	"strings"
	"testing"
)

func TestIDSpellings(t *testing.T) {
	cases := []struct {
		in        string
		valid     bool
		canonical string
		dns       string
	}{
		{in: "sb_0123abcd", valid: true, canonical: "sb_0123abcd", dns: "sb-0123abcd"},
		{in: "sb-0123abcd", valid: true, canonical: "sb_0123abcd", dns: "sb-0123abcd"},
		{in: "sb_a-b", valid: true, canonical: "sb_a-b", dns: "sb-a-b"},
		{in: "sb-A1", valid: true, canonical: "sb_A1", dns: "sb-A1"},
		{in: "sb_" + strings.Repeat("f", MaxIDLen-3), valid: true, canonical: "sb_" + strings.Repeat("f", MaxIDLen-3), dns: "sb-" + strings.Repeat("f", MaxIDLen-3)},
		{in: "sb_" + strings.Repeat("f", MaxIDLen-2)},
		{in: ""},
		{in: "sb_"},
		{in: "sb-"},
		{in: "sb"},
		{in: "xb_0123"},
		{in: "SB_0123"},
		{in: "sb_01_23"},
		{in: "sb_01.23"},
		{in: "sb_01/23"},
		{in: "sb_é"},
		{in: "0123abcd"},
		{in: " sb_0123"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			if got := ValidID(tc.in); got != tc.valid {
				t.Fatalf("ValidID(%q) = %v, want %v", tc.in, got, tc.valid)
			}
			c, ok := CanonicalID(tc.in)
			if ok != tc.valid || c != tc.canonical {
				t.Errorf("CanonicalID(%q) = %q, %v; want %q, %v", tc.in, c, ok, tc.canonical, tc.valid)
			}
			d, ok := DNSID(tc.in)
			if ok != tc.valid || d != tc.dns {
				t.Errorf("DNSID(%q) = %q, %v; want %q, %v", tc.in, d, ok, tc.dns, tc.valid)
			}
		})
	}
}

func TestSameID(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
	}{
		{"sb_abc", "sb-abc", true},
		{"sb-abc", "sb-abc", true},
		{"sb_abc", "sb_abd", false},
		{"sb_abc", "abc", false},
		{"", "", false},
	}
	for _, tc := range cases {
		if got := SameID(tc.a, tc.b); got != tc.want {
			t.Errorf("SameID(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// FuzzSpellings checks the properties every caller relies on: a valid id
// converts both ways without loss, the DNS spelling is a lowercase-safe DNS
// label character set, and invalid input converts to nothing.
func FuzzSpellings(f *testing.F) {
	for _, s := range []string{"sb_0123abcd", "sb-0123abcd", "sb_", "sb-a-b", "", "sb_a_b", "sb_\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, okC := CanonicalID(s)
		d, okD := DNSID(s)
		if okC != ValidID(s) || okD != ValidID(s) {
			t.Fatalf("conversions of %q disagree with Valid", s)
		}
		if !okC {
			if c != "" || d != "" {
				t.Fatalf("invalid %q converted to %q / %q", s, c, d)
			}
			return
		}
		if !strings.HasPrefix(c, IDPrefix) || !strings.HasPrefix(d, DNSIDPrefix) {
			t.Fatalf("%q: canonical %q, dns %q have the wrong prefixes", s, c, d)
		}
		if strings.Contains(d, "_") || len(d) > MaxIDLen {
			t.Fatalf("%q: dns spelling %q is not a DNS label", s, d)
		}
		if back, ok := CanonicalID(d); !ok || back != c {
			t.Fatalf("CanonicalID(DNSID(%q)) = %q, %v; want %q", s, back, ok, c)
		}
		if back, ok := DNSID(c); !ok || back != d {
			t.Fatalf("DNSID(CanonicalID(%q)) = %q, %v; want %q", s, back, ok, d)
		}
		if !SameID(s, c) || !SameID(s, d) {
			t.Fatalf("%q does not equal its own spellings", s)
		}
	})
}
