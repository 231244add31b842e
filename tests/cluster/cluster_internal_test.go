package cluster

import (
	"crypto/x509"
	"encoding/csv"
	"os"
	"strings"
	"testing"
)

func TestVersionLDFlags(t *testing.T) {
	got, err := versionLDFlags("v1.36.3")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"-X k8s.io/component-base/version.gitVersion=v1.36.3",
		"-X k8s.io/component-base/version.gitMajor=1",
		"-X k8s.io/component-base/version.gitMinor=36",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("ldflags %q lack %q", got, want)
		}
	}
	for _, bad := range []string{"", "1.36.3", "v1", "v1.", "v.36.3"} {
		if _, err := versionLDFlags(bad); err == nil {
			t.Errorf("versionLDFlags(%q) = nil error, want one", bad)
		}
	}
}

func TestDecodeCRDs(t *testing.T) {
	const two = `
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: as.example.com
---
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: bs.example.com
`
	crds, err := decodeCRDs([]byte(two))
	if err != nil {
		t.Fatal(err)
	}
	if len(crds) != 2 || crds[0].Name != "as.example.com" || crds[1].Name != "bs.example.com" {
		t.Fatalf("decoded %d CRDs: %+v", len(crds), crds)
	}

	const notCRD = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	if _, err := decodeCRDs([]byte(notCRD)); err == nil || !strings.Contains(err.Error(), "ConfigMap") {
		t.Fatalf("decoding a ConfigMap: err = %v, want one naming the kind", err)
	}
}

func TestUserTableTokenFile(t *testing.T) {
	users := defaultUsers().add("bob", []string{"g1", "g2"}).add(UnprivilegedUser, []string{"other"})
	if err := users.issueTokens(); err != nil {
		t.Fatal(err)
	}
	path, err := users.write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		t.Errorf("token file mode %v is readable by others", fi.Mode().Perm())
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]string{}
	tokens := map[string]bool{}
	for _, r := range rows {
		if len(r) != 4 || r[1] != r[2] || len(r[0]) < 32 {
			t.Fatalf("row %q is not token,user,uid,groups with a long token", r)
		}
		got[r[1]] = strings.Split(r[3], ",")
		tokens[r[0]] = true
	}
	want := map[string]string{AdminUser: "system:masters", UnprivilegedUser: "other", "bob": "g1,g2"}
	if len(got) != len(want) || len(tokens) != len(want) {
		t.Fatalf("users %v (%d distinct tokens), want %v with distinct tokens", got, len(tokens), want)
	}
	for name, groups := range want {
		if strings.Join(got[name], ",") != groups {
			t.Errorf("user %s groups %v, want %s", name, got[name], groups)
		}
	}
}

func TestPKIChains(t *testing.T) {
	p, err := newPKI(nil)
	if err != nil {
		t.Fatal(err)
	}
	verify := func(name string, leaf, ca *keyPair, usage x509.ExtKeyUsage, host string) {
		t.Helper()
		roots := x509.NewCertPool()
		roots.AddCert(ca.cert)
		opts := x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{usage}, DNSName: host}
		if _, err := leaf.cert.Verify(opts); err != nil {
			t.Errorf("%s does not verify: %v", name, err)
		}
	}
	verify("serving cert", p.serving, p.servingCA, x509.ExtKeyUsageServerAuth, "127.0.0.1")
	verify("front-proxy client cert", p.proxyCli, p.frontProxy, x509.ExtKeyUsageClientAuth, "")
	if cn := p.proxyCli.cert.Subject.CommonName; cn != FrontProxyClientName {
		t.Errorf("front-proxy client CN = %q, want %q", cn, FrontProxyClientName)
	}
	// The front-proxy CA must not vouch for the serving certificate, or an
	// aggregated server would accept the wrong client.
	roots := x509.NewCertPool()
	roots.AddCert(p.frontProxy.cert)
	if _, err := p.serving.cert.Verify(x509.VerifyOptions{Roots: roots}); err == nil {
		t.Error("serving certificate verifies against the front-proxy CA")
	}
}

func TestServiceNameFor(t *testing.T) {
	if got := serviceNameFor("probe.test.cocoonstack.io"); got != "api-probe-test-cocoonstack-io" {
		t.Errorf("serviceNameFor = %q", got)
	}
	long := serviceNameFor(strings.Repeat("a.", 40))
	if len(long) > 63 || strings.HasSuffix(long, "-") {
		t.Errorf("serviceNameFor(long) = %q, not a DNS label", long)
	}
}
