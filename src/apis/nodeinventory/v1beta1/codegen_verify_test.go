package v1beta1_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// TestCodegenUpToDate reruns controller-gen and diffs its output against the
// checked-in files, byte for byte. It needs a Go toolchain and module access,
// which hermetic (Bazel) test runs do not have, so it runs only when asked;
// the reflection-based drift tests in this package cover those runs.
func TestCodegenUpToDate(t *testing.T) {
	if os.Getenv("SANDBOX_CODEGEN_CHECK") != "1" {
		t.Skip("set SANDBOX_CODEGEN_CHECK=1 to rerun controller-gen and diff its output")
	}
	script, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "tools", "codegen.sh"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), "bash", script, "--verify")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("tools/codegen.sh --verify: %v\n%s", err, out)
	}
}
