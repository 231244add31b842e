package rootfs_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
)

// ciPair makes a base tree of version baseVersion and a layer that says it
// was computed over layerBase (no marker when layerBase is "").
func ciPair(t *testing.T, baseVersion, layerBase string) (base, layer string) {
	t.Helper()
	base, layer = t.TempDir(), t.TempDir()
	write := func(dir, file, content string) {
		p := filepath.Join(dir, file)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(base, rootfs.Marker, "template=base\nversion="+baseVersion+"\n")
	if layerBase != "" {
		write(layer, rootfs.CIMarker, "template=e2b-ci\nbase="+layerBase+"\n")
	}
	return base, layer
}

func TestCodeInterpreterLayer(t *testing.T) {
	isolate(t)
	t.Setenv(rootfs.CIEnvVar, "")

	base, layer := ciPair(t, "bookworm-1", "bookworm-1")
	t.Setenv(rootfs.CIEnvVar, layer)
	if got, err := rootfs.CodeInterpreter(base); err != nil || got != layer {
		t.Fatalf("CodeInterpreter = %q, %v; want %q", got, err, layer)
	}

	// A layer computed over another base is refused, saying how to fix it.
	base, layer = ciPair(t, "bookworm-2", "bookworm-1")
	t.Setenv(rootfs.CIEnvVar, layer)
	if _, err := rootfs.CodeInterpreter(base); err == nil || !strings.Contains(err.Error(), rootfs.CIScript) {
		t.Fatalf("a layer over another base: %v, want an error naming %s", err, rootfs.CIScript)
	}

	// No marker: incomplete.
	base, layer = ciPair(t, "bookworm-1", "")
	t.Setenv(rootfs.CIEnvVar, layer)
	if _, err := rootfs.CodeInterpreter(base); err == nil || !strings.Contains(err.Error(), rootfs.CIMarker) {
		t.Fatalf("a layer without its marker: %v, want an error naming %s", err, rootfs.CIMarker)
	}

	// Unset: the default link in the cache, which does not exist here.
	t.Setenv(rootfs.CIEnvVar, "")
	cache := t.TempDir()
	t.Setenv("SANDBOX_OPERATOR_CACHE", cache)
	if _, err := rootfs.CodeInterpreter(base); err == nil || !strings.Contains(err.Error(), filepath.Join(cache, "rootfs", "e2b-ci")) {
		t.Fatalf("no layer: %v, want an error naming the default path", err)
	}
}
