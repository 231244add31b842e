package apiserverenv

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
)

// sandboxdTokenBytes is the root token's entropy.
const sandboxdTokenBytes = 24

// WriteSandboxdToken writes a fresh sandboxd root token to dir, as a
// Secret mount would hold it, and returns the file (for
// Options.SandboxdTokenFile) and the token (for the fleet's nodes, which
// must accept it).
func WriteSandboxdToken(dir string) (path, token string, err error) {
	b := make([]byte, sandboxdTokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("generate sandboxd token: %w", err)
	}
	token = hex.EncodeToString(b)
	path = filepath.Join(dir, "sandboxd-token")
	if err := os.WriteFile(path, []byte(token+"\n"), 0o600); err != nil {
		return "", "", fmt.Errorf("write sandboxd token: %w", err)
	}
	return path, token, nil
}
