package apiserverenv

import (
	"encoding/hex"
	"os"
	"path/filepath"
	"testing"
)

func TestWriteSandboxdToken(t *testing.T) {
	dir := t.TempDir()
	path, token, err := WriteSandboxdToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Dir(path) != dir {
		t.Errorf("token file %s is not in %s", path, dir)
	}
	if b, err := hex.DecodeString(token); err != nil || len(b) != sandboxdTokenBytes {
		t.Errorf("token %q is not %d hex-encoded bytes (%v)", token, sandboxdTokenBytes, err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(data) != token+"\n" {
		t.Errorf("file holds %q, want the token and a newline", data)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if mode := st.Mode().Perm(); mode != 0o600 {
		t.Errorf("mode %v, want 0600: the token is a secret", mode)
	}

	if _, again, err := WriteSandboxdToken(t.TempDir()); err != nil || again == token {
		t.Errorf("second token %q (%v), want a fresh one", again, err)
	}
}
