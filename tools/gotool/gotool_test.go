package gotool

import (
	"os"
	"path/filepath"
	"testing"
)

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module example.com/m\n\ngo 1.26\n": "example.com/m",
		"// c\nmodule \"example.com/q\"\n":  "example.com/q",
		"modulex example.com/m\n":           "",
		"go 1.26\n":                         "",
	} {
		if got := modulePath([]byte(in)); got != want {
			t.Errorf("modulePath(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestModuleRootFindsTheNearestGoMod(t *testing.T) {
	root := t.TempDir()
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module example.com/m\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	deep := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(deep, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(deep)
	t.Setenv("BUILD_WORKSPACE_DIRECTORY", "")
	got, mod, err := ModuleRoot()
	if err != nil || mod != "example.com/m" {
		t.Fatalf("ModuleRoot() = %q, %q, %v", got, mod, err)
	}
	if evaluated, _ := filepath.EvalSymlinks(got); evaluated != mustEval(t, root) {
		t.Errorf("ModuleRoot() = %q, want %q", got, root)
	}
	// Under bazel run the workspace is named, whatever the directory.
	t.Setenv("BUILD_WORKSPACE_DIRECTORY", root)
	t.Chdir(os.TempDir())
	if got, _, err := ModuleRoot(); err != nil || got != root {
		t.Errorf("with BUILD_WORKSPACE_DIRECTORY: %q, %v", got, err)
	}
}

func mustEval(t *testing.T, p string) string {
	t.Helper()
	e, err := filepath.EvalSymlinks(p)
	if err != nil {
		t.Fatal(err)
	}
	return e
}
