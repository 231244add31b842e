package e2b_test

import (
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
)

// FuzzKeyAndAliasFiles feeds arbitrary files to the key and alias parsers
// (operator input, but read at startup from Secret mounts): they never
// panic, every key a file they accept holds is found again, and every
// alias they accept names an image a create could name too.
func FuzzKeyAndAliasFiles(f *testing.F) {
	for _, s := range []string{
		"key-one\nkey-two team-a\n# comment\n\n",
		"base e2b-base:latest\npython ghcr.io/x/py:3.12 large\n",
		"a b c d\n", "k ns!\n", "dup x\ndup y\n", "\x00\n", "../../etc/passwd img\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if keys, err := e2b.ParseAPIKeys(data, "default"); err == nil {
			// Every key the file holds is found again.
			for _, line := range strings.Split(string(data), "\n") {
				f := strings.Fields(line)
				if len(f) == 0 || strings.HasPrefix(f[0], "#") {
					continue
				}
				if _, ok := keys.Namespace(f[0]); !ok {
					t.Fatalf("ParseAPIKeys accepted a file whose key %q it does not find", f[0])
				}
			}
		}
		aliases, err := e2b.ParseAliases(data)
		if err != nil {
			return
		}
		for alias, tmpl := range aliases {
			for _, id := range []string{alias, tmpl.Image, tmpl.Size} {
				if id == "" || len(id) > 255 || strings.ContainsAny(id, "\x00\r\n\t ") || strings.Contains(id, "..") {
					t.Fatalf("ParseAliases accepted %q (alias %q → %+v)", id, alias, tmpl)
				}
			}
		}
	})
}
