package warmpool

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLeaseNamespace(t *testing.T) {
	dir := t.TempDir()
	sa := filepath.Join(dir, "namespace")
	none := func(string) string { return "" }
	if got := leaseNamespace(none, sa); got != "default" {
		t.Errorf("outside a cluster: %q, want default", got)
	}
	if err := os.WriteFile(sa, []byte("sandbox-system\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := leaseNamespace(none, sa); got != "sandbox-system" {
		t.Errorf("service account file: %q, want sandbox-system", got)
	}
	env := func(k string) string {
		if k == NamespaceEnv {
			return "from-env"
		}
		return ""
	}
	if got := leaseNamespace(env, sa); got != "from-env" {
		t.Errorf("%s set: %q, want from-env", NamespaceEnv, got)
	}
}
