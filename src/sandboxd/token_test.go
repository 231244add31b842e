package sandboxd

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
)

func TestTokenOptions(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("token", "  s3cret-from-file\n")
	cases := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{name: "neither", want: ""},
		{name: "literal", args: []string{"--sandboxd-token=literal"}, want: "literal"},
		{name: "file wins", args: []string{"--sandboxd-token=literal", "--sandboxd-token-file=" + good}, want: "s3cret-from-file"},
		{name: "empty file", args: []string{"--sandboxd-token-file=" + write("empty", "\n\n")}, wantErr: true},
		{name: "two lines", args: []string{"--sandboxd-token-file=" + write("two", "a\nb\n")}, wantErr: true},
		{name: "missing file", args: []string{"--sandboxd-token-file=" + filepath.Join(dir, "nope")}, wantErr: true},
		{name: "oversized file", args: []string{"--sandboxd-token-file=" + write("big", strings.Repeat("x", maxTokenFileBytes+1))}, wantErr: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var o TokenOptions
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			got, err := o.Load()
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Fatalf("Load() = %q, %v; want %q, error %v", got, err, tc.want, tc.wantErr)
			}
			if err != nil && strings.Contains(err.Error(), "s3cret") {
				t.Fatalf("error leaks the token: %v", err)
			}
		})
	}
}
