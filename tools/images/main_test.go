package main

import (
	"bytes"
	"context"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/cocoonstack/sandbox-operator/tools/images/ociimage/elftest"
)

// writeBinaries writes one tiny static ELF per architecture and returns the
// --binary arguments for them.
func writeBinaries(t *testing.T, name string) []string {
	t.Helper()
	dir := t.TempDir()
	var args []string
	for _, arch := range []string{"amd64", "arm64"} {
		p := filepath.Join(dir, arch, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, elftest.Static(arch, name+" for "+arch), 0o755); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--binary", "linux/"+arch+"="+p)
	}
	return args
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	code = run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

func buildLayout(t *testing.T, name, out string) string {
	t.Helper()
	args := append([]string{"build", "--name", name, "--version", "v0.1.0", "--out", out}, writeBinaries(t, name)...)
	code, stdout, stderr := runCLI(t, args...)
	if code != 0 {
		t.Fatalf("build %s: exit %d: %s", name, code, stderr)
	}
	fields := strings.Fields(stdout)
	if len(fields) != 3 || fields[0] != name || !strings.HasPrefix(fields[1], "sha256:") || fields[2] != out {
		t.Fatalf("build printed %q, want NAME DIGEST OUT", stdout)
	}
	return fields[1]
}

func TestBuildDigestPushPull(t *testing.T) {
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	dir := t.TempDir()

	// Two images, one as a tar and one as a directory.
	digests := map[string]string{}
	layouts := map[string]string{
		"sandbox-apiserver":  filepath.Join(dir, "sandbox-apiserver.oci.tar"),
		"sandbox-envd-proxy": filepath.Join(dir, "sandbox-envd-proxy-layout"),
	}
	for name, out := range layouts {
		digests[name] = buildLayout(t, name, out)
	}

	// digest reads back what build printed.
	code, stdout, stderr := runCLI(t, "digest", layouts["sandbox-apiserver"])
	if code != 0 || !strings.HasPrefix(stdout, digests["sandbox-apiserver"]+" ") {
		t.Fatalf("digest: exit %d, %q %s", code, stdout, stderr)
	}

	// The tag comes from the environment, as `bazel run //images:push` uses it.
	t.Setenv(envTag, "v0.1.0")
	code, stdout, stderr = runCLI(t, "push", "--repository-prefix", host+"/cocoonstack",
		layouts["sandbox-apiserver"], layouts["sandbox-envd-proxy"])
	if code != 0 {
		t.Fatalf("push: exit %d: %s", code, stderr)
	}
	for image, d := range digests {
		ref := host + "/cocoonstack/" + image + ":v0.1.0"
		if !strings.Contains(stdout, ref+"@"+d+"\n") {
			t.Errorf("push output %q lacks %s@%s", stdout, ref, d)
		}
		r, err := name.ParseReference(ref)
		if err != nil {
			t.Fatal(err)
		}
		idx, err := remote.Index(r)
		if err != nil {
			t.Fatalf("pulling %s: %v", ref, err)
		}
		if got, _ := idx.Digest(); got.String() != d {
			t.Errorf("%s pulled %s, built %s", ref, got, d)
		}
	}

	// An explicit repository overrides the prefix/name rule.
	code, stdout, stderr = runCLI(t, "push", "--repository", host+"/elsewhere/api", "--tag", "edge", layouts["sandbox-apiserver"])
	if code != 0 || !strings.Contains(stdout, host+"/elsewhere/api:edge@"+digests["sandbox-apiserver"]) {
		t.Fatalf("push --repository: exit %d, %q %s", code, stdout, stderr)
	}
}

func TestBuildIsReproducibleThroughTheCLI(t *testing.T) {
	bins := writeBinaries(t, "sandbox-e2b")
	var tars [][]byte
	for _, out := range []string{"a.tar", "b.tar"} {
		p := filepath.Join(t.TempDir(), out)
		args := append([]string{"build", "--name", "sandbox-e2b", "--out", p}, bins...)
		if code, _, stderr := runCLI(t, args...); code != 0 {
			t.Fatalf("build: %s", stderr)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		tars = append(tars, b)
	}
	if !bytes.Equal(tars[0], tars[1]) {
		t.Fatal("two builds of the same binaries wrote different layout tars")
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv(envTag, "")
	for _, args := range [][]string{
		nil,
		{"frobnicate"},
		{"build", "--name", "x"},
		{"build", "--name", "x", "--out", "o.tar", "--binary", "linux/amd64"},
		{"build", "--name", "x", "--out", "o.tar", "--binary", "linux/amd64=/bin/true", "--created", "yesterday"},
		{"push", "some.tar"},
		{"push", "--tag", "v1"},
		{"push", "--tag", "v1", "--repository", "r", "a.tar", "b.tar"},
	} {
		if code, _, _ := runCLI(t, args...); code != 2 {
			t.Errorf("%q exited %d, want 2", args, code)
		}
	}
	// A missing binary is an operational failure, not a usage error.
	if code, _, stderr := runCLI(t, "build", "--name", "x", "--out", filepath.Join(t.TempDir(), "o.tar"),
		"--binary", "linux/amd64=/nonexistent/x"); code != 1 || !strings.Contains(stderr, "/nonexistent/x") {
		t.Errorf("missing binary: exit %d, %s", code, stderr)
	}
}

func TestParseCreated(t *testing.T) {
	for in, want := range map[string]time.Time{
		"":                     {},
		"1700000000":           time.Unix(1700000000, 0).UTC(),
		"2026-01-02T03:04:05Z": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	} {
		got, err := parseCreated(in)
		if err != nil || !got.Equal(want) {
			t.Errorf("parseCreated(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}
