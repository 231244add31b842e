package envdproxy_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/envdproxy"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

func TestParseHost(t *testing.T) {
	const d = "sandbox.example.com"
	ok := func(id string, port int) envdproxy.Target { return envdproxy.Target{ID: id, Port: port} }
	cases := []struct {
		host string
		want envdproxy.Target
		fail bool
	}{
		{host: "49983-sb-0123abcd.sandbox.example.com", want: ok("sb_0123abcd", 49983)},
		{host: "49983-sb_0123abcd.sandbox.example.com", want: ok("sb_0123abcd", 49983)},
		{host: "49983-sb-0123abcd.sandbox.example.com:8443", want: ok("sb_0123abcd", 49983)},
		{host: "49983-sb-0123abcd.sandbox.example.com.", want: ok("sb_0123abcd", 49983)},
		{host: "49983-sb-0123abcd.SANDBOX.Example.COM", want: ok("sb_0123abcd", 49983)},
		{host: "49983-SB-0123ABCD.sandbox.example.com", want: ok("sb_0123abcd", 49983)},
		{host: "3000-sb-ab-cd-ef.sandbox.example.com", want: ok("sb_ab-cd-ef", 3000)},
		{host: "1-sb-x.sandbox.example.com", want: ok("sb_x", 1)},
		{host: "65535-sb-x.sandbox.example.com", want: ok("sb_x", 65535)},
		{host: "08080-sb-x.sandbox.example.com", want: ok("sb_x", 8080)},

		{host: "0-sb-x.sandbox.example.com", fail: true},
		{host: "65536-sb-x.sandbox.example.com", fail: true},
		{host: "123456-sb-x.sandbox.example.com", fail: true},
		{host: "+80-sb-x.sandbox.example.com", fail: true},
		{host: "-sb-x.sandbox.example.com", fail: true},
		{host: "abc-sb-x.sandbox.example.com", fail: true},
		{host: "49983.sandbox.example.com", fail: true},
		{host: "49983-xx-0123.sandbox.example.com", fail: true},
		{host: "49983-sb-.sandbox.example.com", fail: true},
		{host: "49983-sb-a.b.sandbox.example.com", fail: true},
		{host: "49983-sb-a_b.sandbox.example.com", fail: true},
		{host: "49983-sb-0123abcdevil.example.com", fail: true},
		{host: "49983-sb-0123.sandbox.example.com.evil.org", fail: true},
		{host: "49983-sb-0123xsandbox.example.com", fail: true},
		{host: "sandbox.example.com", fail: true},
		{host: ".sandbox.example.com", fail: true},
		{host: "", fail: true},
		{host: "[::1]:8443", fail: true},
		{host: "127.0.0.1:8443", fail: true},
		{host: "49983-sb-" + strings.Repeat("a", 61) + ".sandbox.example.com", fail: true},
	}
	for _, c := range cases {
		got, err := envdproxy.ParseHost(c.host, d)
		if c.fail {
			if err == nil {
				t.Errorf("ParseHost(%q) = %+v, want an error", c.host, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("ParseHost(%q) = %+v, %v; want %+v", c.host, got, err, c.want)
		}
	}
}

func TestRoute(t *testing.T) {
	const d = "sandbox.example.com"
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Add(kv[i], kv[i+1])
		}
		return h
	}
	cases := []struct {
		name string
		h    http.Header
		host string
		want envdproxy.Target
		fail bool
	}{
		{name: "host only", h: hdr(), host: "8080-sb-aa.sandbox.example.com", want: envdproxy.Target{ID: "sb_aa", Port: 8080}},
		{name: "headers only", h: hdr("E2b-Sandbox-Id", "sb-bb", "E2b-Sandbox-Port", "49983"), host: "proxy.local", want: envdproxy.Target{ID: "sb_bb", Port: 49983}},
		{name: "headers win", h: hdr("E2b-Sandbox-Id", "sb_bb", "E2b-Sandbox-Port", " 3000 "), host: "8080-sb-aa.sandbox.example.com", want: envdproxy.Target{ID: "sb_bb", Port: 3000}},
		{name: "lower-case header names", h: http.Header{"E2b-Sandbox-Id": {"sb_cc"}, "E2b-Sandbox-Port": {"1"}}, host: "", want: envdproxy.Target{ID: "sb_cc", Port: 1}},
		{name: "id header alone", h: hdr("E2b-Sandbox-Id", "sb_bb"), host: "8080-sb-aa.sandbox.example.com", fail: true},
		{name: "port header alone", h: hdr("E2b-Sandbox-Port", "80"), host: "8080-sb-aa.sandbox.example.com", fail: true},
		{name: "repeated id header", h: hdr("E2b-Sandbox-Id", "sb_a", "E2b-Sandbox-Id", "sb_b", "E2b-Sandbox-Port", "80"), fail: true},
		{name: "header port 0", h: hdr("E2b-Sandbox-Id", "sb_a", "E2b-Sandbox-Port", "0"), fail: true},
		{name: "header port 65536", h: hdr("E2b-Sandbox-Id", "sb_a", "E2b-Sandbox-Port", "65536"), fail: true},
		{name: "header port -1", h: hdr("E2b-Sandbox-Id", "sb_a", "E2b-Sandbox-Port", "-1"), fail: true},
		{name: "header bad id", h: hdr("E2b-Sandbox-Id", "0123", "E2b-Sandbox-Port", "80"), fail: true},
		{name: "nothing", h: hdr(), host: "proxy.local", fail: true},
	}
	for _, c := range cases {
		got, err := envdproxy.Route(c.h, c.host, d)
		if c.fail {
			if err == nil {
				t.Errorf("%s: Route = %+v, want an error", c.name, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("%s: Route = %+v, %v; want %+v", c.name, got, err, c.want)
		}
	}
}

func TestNormalizeDomain(t *testing.T) {
	for in, want := range map[string]string{"Sandbox.Example.COM": "sandbox.example.com", ".a.b.": "a.b", " x.y ": "x.y"} {
		if got, err := envdproxy.NormalizeDomain(in); err != nil || got != want {
			t.Errorf("NormalizeDomain(%q) = %q, %v", in, got, err)
		}
	}
	for _, in := range []string{"", ".", "https://a.b", "a.b:443", "*.a.b", "a..b", "a b"} {
		if got, err := envdproxy.NormalizeDomain(in); err == nil {
			t.Errorf("NormalizeDomain(%q) = %q, want an error", in, got)
		}
	}
}

// checkTarget is what every accepted request must satisfy, whatever the
// input: a canonical id, a port in range, and a host built from them
// routes back to the same target.
func checkTarget(t *testing.T, got envdproxy.Target, domain string) {
	t.Helper()
	if got.Port < 1 || got.Port > 65535 {
		t.Fatalf("port %d out of range", got.Port)
	}
	if !strings.HasPrefix(got.ID, sandbox.IDPrefix) || !sandbox.ValidID(got.ID) {
		t.Fatalf("id %q is not canonical", got.ID)
	}
	dnsID, _ := sandbox.DNSID(got.ID)
	again, err := envdproxy.ParseHost(fmt.Sprintf("%d-%s.%s", got.Port, strings.ToLower(dnsID), domain), domain)
	if err != nil || again.Port != got.Port || again.ID != strings.ToLower(got.ID) {
		t.Fatalf("round trip of %+v: %+v, %v", got, again, err)
	}
}

func FuzzParseHost(f *testing.F) {
	for _, s := range []string{
		"49983-sb-0123abcd.sandbox.example.com", "49983-sb_0123abcd.SANDBOX.example.com:443",
		"3000-sb-a-b-c.sandbox.example.com.", "0-sb-x.sandbox.example.com", "65536-sb-x.sandbox.example.com",
		"-sb-x.sandbox.example.com", "[::1]:1", "sandbox.example.com", "1-sb-x.y.sandbox.example.com", "",
	} {
		f.Add(s)
	}
	const d = "sandbox.example.com"
	f.Fuzz(func(t *testing.T, host string) {
		got, err := envdproxy.ParseHost(host, d)
		if err != nil {
			return
		}
		checkTarget(t, got, d)
		bare, _, _ := strings.Cut(strings.TrimSuffix(host, "."), ":")
		if !strings.HasSuffix(strings.ToLower(strings.TrimSuffix(bare, ".")), "."+d) {
			t.Fatalf("accepted %q outside the domain", host)
		}
	})
}

func FuzzRoute(f *testing.F) {
	f.Add("sb-0123", "49983", "x.local", true)
	f.Add("sb_0123", " 8080", "8080-sb-1.sandbox.example.com", true)
	f.Add("", "", "8080-sb-1.sandbox.example.com", false)
	f.Add("sb_0123", "0", "", true)
	f.Add("SB_0123", "99999", "", true)
	const d = "sandbox.example.com"
	f.Fuzz(func(t *testing.T, id, port, host string, headers bool) {
		h := http.Header{}
		if headers {
			h.Set(envdproxy.HeaderSandboxID, id)
			h.Set(envdproxy.HeaderSandboxPort, port)
		}
		got, err := envdproxy.Route(h, host, d)
		if err != nil {
			return
		}
		checkTarget(t, got, d)
		if headers {
			want, werr := envdproxy.ParseHeaders(id, port)
			if werr != nil || want != got {
				t.Fatalf("headers present but Route = %+v, ParseHeaders = %+v, %v", got, want, werr)
			}
		}
	})
}

func TestRouteErrorsAreNotSecrets(t *testing.T) {
	// The 400 body is the routing error's text; it must never echo input.
	_, err := envdproxy.ParseHost("8080-xx-secretvalue.sandbox.example.com", "sandbox.example.com")
	if err == nil || strings.Contains(err.Error(), "secretvalue") {
		t.Fatalf("error %v", err)
	}
}
