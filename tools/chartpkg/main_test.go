package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeChart(t *testing.T) (dir string, files map[string]string) {
	t.Helper()
	dir = t.TempDir()
	files = map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: demo\nversion: 0.0.0-latest\nappVersion: \"latest\"\n",
		"values.yaml":       "# the image\nimage:\n  # its tag\n  tag: latest\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: demo\n",
		".helmignore":       "*.go\n",
		"chart.go":          "package chart\n",
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir, files
}

func runCLI(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var o, e bytes.Buffer
	code = run(args, &o, &e)
	return code, o.String(), e.String()
}

func TestChartAndFileModesWriteTheSameArchive(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	dir, files := writeChart(t)
	outDir := t.TempDir()
	code, stdout, stderr := runCLI(t, "--chart", dir, "--image-version", "v1.2.3", "--out-dir", outDir)
	if code != 0 {
		t.Fatalf("--chart: exit %d: %s", code, stderr)
	}
	want := filepath.Join(outDir, "demo-1.2.3.tgz")
	if strings.TrimSpace(stdout) != want {
		t.Fatalf("printed %q, want %q", stdout, want)
	}
	fromDir, err := os.ReadFile(want)
	if err != nil {
		t.Fatal(err)
	}

	out := filepath.Join(t.TempDir(), "named.tgz")
	args := []string{"--image-version", "v1.2.3", "--out", out, "--expect-name", "demo-1.2.3.tgz"}
	for name := range files {
		args = append(args, "--file", name+"="+filepath.Join(dir, filepath.FromSlash(name)))
	}
	if code, _, stderr := runCLI(t, args...); code != 0 {
		t.Fatalf("--file: exit %d: %s", code, stderr)
	}
	fromFiles, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fromDir, fromFiles) {
		t.Fatal("--chart and --file packaged different bytes")
	}

	// The default version is the images' default, dev.
	if code, stdout, stderr := runCLI(t, "--chart", dir, "--out-dir", outDir); code != 0 || !strings.HasSuffix(strings.TrimSpace(stdout), "demo-0.0.0-dev.tgz") {
		t.Fatalf("default version: exit %d, %q %s", code, stdout, stderr)
	}
}

func TestMtime(t *testing.T) {
	dir, _ := writeChart(t)
	pack := func(args ...string) []byte {
		t.Helper()
		out := filepath.Join(t.TempDir(), "c.tgz")
		if code, _, stderr := runCLI(t, append([]string{"--chart", dir, "--out", out}, args...)...); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, stderr)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	epoch := pack()
	if !bytes.Equal(epoch, pack("--mtime", "0")) || !bytes.Equal(epoch, pack("--mtime", "1970-01-01T00:00:00Z")) {
		t.Error("--mtime 0 differs from the default")
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	fromEnv := pack()
	if bytes.Equal(epoch, fromEnv) || !bytes.Equal(fromEnv, pack("--mtime", "2023-11-14T22:13:20Z")) {
		t.Error("SOURCE_DATE_EPOCH is not the default time")
	}
}

func TestErrors(t *testing.T) {
	dir, _ := writeChart(t)
	out := filepath.Join(t.TempDir(), "c.tgz")
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{nil, 2, "give either --chart or --file"},
		{[]string{"--chart", dir, "--file", "Chart.yaml=x"}, 2, "give either"},
		{[]string{"--chart", dir, "extra"}, 2, "unexpected arguments"},
		{[]string{"--chart", dir, "--out", out, "--out-dir", "."}, 2, "exclude each other"},
		{[]string{"--chart", dir, "--mtime", "yesterday"}, 2, "--mtime"},
		{[]string{"--chart", dir, "--mtime", "-5"}, 2, "before the Unix epoch"},
		{[]string{"--file", "Chart.yaml"}, 2, "want NAME=PATH"},
		{[]string{"--chart", dir, "--out", out, "--image-version", "feature_x"}, 1, "no SemVer 2 chart version"},
		{[]string{"--chart", dir, "--out", out, "--expect-name", "demo-9.9.9.tgz"}, 1, "disagree"},
		{[]string{"--chart", filepath.Join(dir, "missing")}, 1, "loading chart directory"},
	} {
		code, _, stderr := runCLI(t, tc.args...)
		if code != tc.code || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d mentioning %q", tc.args, code, stderr, tc.code, tc.msg)
		}
	}
	if code, stdout, _ := runCLI(t, "--help"); code != 0 || stdout != "" {
		t.Errorf("--help: exit %d", code)
	}
}
