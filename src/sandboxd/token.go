package sandboxd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/pflag"
)

// maxTokenFileBytes bounds the token file; a token is a short string, and a
// mistaken path (a log, a device) must not be read whole.
const maxTokenFileBytes = 64 << 10

// TokenOptions is the fleet sandboxd token a binary presents to every node.
// The token is a credential: nothing here prints or logs it.
type TokenOptions struct {
	// Token is the literal --sandboxd-token.
	Token string
	// File is --sandboxd-token-file; when set it overrides Token.
	File string
}

// AddFlags registers --sandboxd-token and --sandboxd-token-file.
func (o *TokenOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Token, "sandboxd-token", o.Token,
		"sandboxd api_token presented to every node; a binary that reads claim tokens needs the root one. Prefer --sandboxd-token-file for a Secret mount.")
	fs.StringVar(&o.File, "sandboxd-token-file", o.File,
		"Path to a file (Secret mount) holding the sandboxd api_token; overrides --sandboxd-token when set.")
}

// Load returns the token: the file's content, trimmed of surrounding
// whitespace, when File is set, else Token. Both empty is an empty token
// (node-local calls then carry none). A file that is set but unreadable,
// empty or oversized is an error rather than a silent fallback.
func (o *TokenOptions) Load() (string, error) {
	if o.File == "" {
		return strings.TrimSpace(o.Token), nil
	}
	f, err := os.Open(o.File)
	if err != nil {
		return "", fmt.Errorf("sandboxd token file: %w", err)
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenFileBytes+1))
	if err != nil {
		return "", fmt.Errorf("sandboxd token file %s: %w", o.File, err)
	}
	if len(raw) > maxTokenFileBytes {
		return "", fmt.Errorf("sandboxd token file %s is larger than %d bytes", o.File, maxTokenFileBytes)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" {
		return "", errors.New("sandboxd token file " + o.File + " is empty")
	}
	if strings.ContainsAny(token, "\r\n") {
		return "", fmt.Errorf("sandboxd token file %s holds more than one line", o.File)
	}
	return token, nil
}
