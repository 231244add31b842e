//go:build linux

package isolate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// TestMounts: a read-only mount shows the host directory's files and
// refuses writes; a read-write one carries writes to the host directory;
// the host's mount table is unchanged while and after the sandbox runs.
func TestMounts(t *testing.T) {
	requireRoot(t)
	before := snapshotHost(t)
	roDir, rwDir := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(roDir, "data.txt"), []byte("dataset"), 0o644); err != nil {
		t.Fatal(err)
	}
	rt := newRuntime(t, false)
	sb := start(t, rt, "mounts", func(s *isolate.Spec) {
		s.Mounts = []isolate.Mount{
			{Source: roDir, Target: "/volumes/ro", ReadOnly: true},
			{Source: rwDir, Target: "/models/rw"},
		}
	})
	if got := mustOut(t, sb, request{Op: "read", Path: "/volumes/ro/data.txt"}); got != "dataset" {
		t.Errorf("read-only mount reads %q, want the host file's content", got)
	}
	if r := call(t, sb, request{Op: "write", Path: "/volumes/ro/new.txt", Data: "x"}); !strings.Contains(r.Err, "read-only") {
		t.Errorf("write to the read-only mount: %+v, want a read-only file system error", r)
	}
	if _, err := os.Stat(filepath.Join(roDir, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write through the read-only mount reached the host: %v", err)
	}
	mustOut(t, sb, request{Op: "write", Path: "/models/rw/out.txt", Data: "result"})
	if b, err := os.ReadFile(filepath.Join(rwDir, "out.txt")); err != nil || string(b) != "result" {
		t.Errorf("host side of the read-write mount: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(sb.LayerDir(), "models/rw/out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a write to the mount landed in the writable layer: %v", err)
	}
	if during := snapshotHost(t); during.mounts != before.mounts {
		t.Errorf("host mounts changed while the sandbox runs: %d → %d", before.mounts, during.mounts)
	}
	if err := sb.Close(); err != nil {
		t.Fatal(err)
	}
	after := snapshotHost(t)
	if after.mounts != before.mounts || !slices.Equal(after.isolated, before.isolated) {
		t.Errorf("host state after Close: %+v, before %+v", after, before)
	}
	if b, err := os.ReadFile(filepath.Join(rwDir, "out.txt")); err != nil || string(b) != "result" {
		t.Errorf("the volume's data did not outlive the sandbox: %q, %v", b, err)
	}
}

// TestMountRefusals: bad mounts fail Start, and a symlink on the target's
// path (here from a seeded layer) is never followed out of the sandbox.
func TestMountRefusals(t *testing.T) {
	requireRoot(t)
	rt := newRuntime(t, false)
	src := t.TempDir()
	for name, m := range map[string]isolate.Mount{
		"relative source":  {Source: "rel", Target: "/data"},
		"missing source":   {Source: "/nonexistent-volume", Target: "/data"},
		"root target":      {Source: src, Target: "/"},
		"unclean target":   {Source: src, Target: "/data/../etc"},
		"under /proc":      {Source: src, Target: "/proc/x"},
		"relative target":  {Source: src, Target: "data"},
		"the sandbox /dev": {Source: src, Target: "/dev"},
	} {
		spec := isolate.Spec{ID: "mnt-err", RootFS: rootFS, User: "user", Program: "probe", Config: []byte(`{"Port":8000}`), Mounts: []isolate.Mount{m}}
		if sb, err := rt.Start(context.Background(), spec); err == nil {
			sb.Close()
			t.Errorf("%s: Start succeeded", name)
		}
	}

	escape := filepath.Join(t.TempDir(), "escape")
	if err := os.Mkdir(escape, 0o755); err != nil {
		t.Fatal(err)
	}
	from := t.TempDir()
	if err := os.Symlink(escape, filepath.Join(from, "data")); err != nil {
		t.Fatal(err)
	}
	spec := isolate.Spec{
		ID: "mnt-symlink", RootFS: rootFS, User: "user", Program: "probe", Config: []byte(`{"Port":8000}`),
		From: from, Mounts: []isolate.Mount{{Source: src, Target: "/data/x"}},
	}
	if sb, err := rt.Start(context.Background(), spec); err == nil {
		sb.Close()
		t.Error("a mount through a symlink in the layer started")
	}
	if ents, _ := os.ReadDir(escape); len(ents) != 0 {
		t.Errorf("the symlink was followed onto the host: %s holds %v", escape, ents)
	}
}
