//go:build linux

package isolate_test

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// TestLayersStackOverTheRootFS: Spec.Layers lie over RootFS in order (the
// first on top), a whiteout in a layer hides the file below it, and
// neither the layers nor the root filesystem are written.
func TestLayersStackOverTheRootFS(t *testing.T) {
	requireRoot(t)
	top, bottom := t.TempDir(), t.TempDir()
	write := func(dir, name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(bottom, "layered", "bottom\n")
	write(bottom, "only-bottom", "bottom\n")
	write(top, "layered", "top\n")
	// Character device 0:0 (mode bits none) is overlayfs's whiteout: the base's
	// rootfs-marker is deleted in this layer.
	if err := unix.Mknod(filepath.Join(top, "rootfs-marker"), unix.S_IFCHR, 0); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, false)
	sb := start(t, rt, "layers", func(s *isolate.Spec) { s.Layers = []string{top, bottom} })

	for path, want := range map[string]string{"/layered": "top\n", "/only-bottom": "bottom\n"} {
		if got := mustOut(t, sb, request{Op: "read", Path: path}); got != want {
			t.Errorf("%s inside = %q, want %q", path, got, want)
		}
	}
	if r := call(t, sb, request{Op: "read", Path: "/rootfs-marker"}); r.Err == "" {
		t.Errorf("/rootfs-marker, whited out by a layer, reads %q", r.Out)
	}
	mustOut(t, sb, request{Op: "write", Path: "/layered", Data: "changed"})
	for _, dir := range []string{top, bottom} {
		if b, err := os.ReadFile(filepath.Join(dir, "layered")); err != nil || string(b) == "changed" {
			t.Errorf("the layer %s was written: %q %v", dir, b, err)
		}
	}
	if _, err := os.Stat(filepath.Join(rootFS, "rootfs-marker")); err != nil {
		t.Errorf("the root filesystem lost its file: %v", err)
	}

	if _, err := rt.Start(t.Context(), isolate.Spec{ID: "bad-layer", RootFS: rootFS, Program: "probe",
		Layers: []string{filepath.Join(top, "missing")}}); err == nil {
		t.Error("a missing layer was accepted")
	}
}
