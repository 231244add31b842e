//go:build linux

package simfleet_test

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// An isolated machine sees a claimed volume's host directory at its mount:
// read-only unless claimed rw, when writes reach the host directory.
func TestIsolatedVolumesAreBindMounted(t *testing.T) {
	base, err := rootfs.Base()
	if err != nil {
		t.Fatal(err)
	}
	dataset, scratch := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dataset, "labels.txt"), []byte("cat dog"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The guest's commands run as an unprivileged user.
	for _, dir := range []string{dataset, scratch} {
		if err := os.Chmod(dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	rt, err := isolate.New(isolate.Config{StateDir: t.TempDir(), CgroupParent: "sandbox-operator-fleet-vol-test-" + strconv.Itoa(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, simfleet.Config{
		Pools:     []sandboxd.PoolSpec{{Template: tmpl, Warm: 1}},
		Envd:      &simfleet.EnvdConfig{Secret: envdSecret},
		Isolation: &simfleet.IsolationConfig{Runtime: rt, RootFS: base},
		Volumes: []node.Volume{
			{Name: "imagenet", Dir: dataset},
			{Name: "scratch-db", Dir: scratch, Writable: true},
		},
	})
	t.Cleanup(func() { _ = rt.Close() })
	if err := f.Node(0).WaitWarm(ctxT(t), sandbox.PoolKey{Template: tmpl}.WithDefaults(), 1); err != nil {
		t.Fatal(err)
	}
	root := clientFor(t, f.Node(0), rootToken)
	cl, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "default/vol", Volumes: []sandboxd.VolumeMount{
		{Name: "imagenet"}, {Name: "scratch-db", Mount: "/data/db", Mode: sandboxd.VolumeModeRW},
	}})
	if err != nil {
		t.Fatal(err)
	}
	es := newEnvdVia(t, root, cl, accessToken(cl.Token))
	if got := run(t, es, "cat /volumes/imagenet/labels.txt"); got != "cat dog" {
		t.Errorf("the read-only volume reads %q", got)
	}
	out, exit, _, err := runCommand(t, es.process(), "touch /volumes/imagenet/new 2>&1")
	if err != nil || exit == 0 || !strings.Contains(out, "Read-only") {
		t.Errorf("writing the read-only volume: exit %d, %v: %s", exit, err, out)
	}
	run(t, es, "echo rows > /data/db/table")
	if b, err := os.ReadFile(filepath.Join(scratch, "table")); err != nil || strings.TrimSpace(string(b)) != "rows" {
		t.Errorf("the rw volume's host directory holds %q (%v)", b, err)
	}
	if err := root.Release(ctxT(t), cl.ID); err != nil {
		t.Fatal(err)
	}
}
