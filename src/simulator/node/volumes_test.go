package node_test

import (
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// volumeConfig is testConfig with a catalog: imagenet (read-only, 5 bytes),
// scratch-db (writable) and private (team-a only).
func volumeConfig(t *testing.T) node.Config {
	t.Helper()
	imagenet := t.TempDir()
	if err := os.WriteFile(filepath.Join(imagenet, "labels.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig()
	cfg.Volumes = []node.Volume{
		{Name: "imagenet", Dir: imagenet},
		{Name: "scratch-db", Dir: t.TempDir(), Writable: true},
		{Name: "private", Dir: t.TempDir(), Writable: true, Tenants: []string{"team-a"}},
	}
	return cfg
}

func volumeNames(vols []sandboxd.Volume) []string {
	var out []string
	for _, v := range vols {
		out = append(out, v.Name)
	}
	return out
}

func TestVolumeCatalogListing(t *testing.T) {
	n := startNode(t, volumeConfig(t))
	ctx := ctxT(t)
	root, err := client(t, n, rootToken).Volumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := []sandboxd.Volume{
		{Name: "imagenet", DefaultMount: "/volumes/imagenet", SizeBytes: 5, Available: true, Nodes: 1},
		{Name: "private", DefaultMount: "/volumes/private", Available: true, Nodes: 1, Writable: true},
		{Name: "scratch-db", DefaultMount: "/volumes/scratch-db", Available: true, Nodes: 1, Writable: true},
	}
	if !reflect.DeepEqual(root, want) {
		t.Errorf("root sees %+v, want %+v", root, want)
	}
	a, err := client(t, n, tenantA).Volumes(ctx)
	if err != nil || strings.Join(volumeNames(a), ",") != "imagenet,private,scratch-db" {
		t.Errorf("team-a sees %v (%v), want its private entry too", volumeNames(a), err)
	}
	b, err := client(t, n, tenantB).Volumes(ctx)
	if err != nil || strings.Join(volumeNames(b), ",") != "imagenet,scratch-db" {
		t.Errorf("team-b sees %v (%v), want no private entry", volumeNames(b), err)
	}
	_, err = client(t, n, unknownTok).Volumes(ctx)
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
}

// A peer of the same mesh that declares a name counts in nodes; a name only
// a peer declares is listed to root as unavailable here, never to a tenant.
func TestVolumeCatalogCountsPeers(t *testing.T) {
	peerCfg := volumeConfig(t)
	peerCfg.Name = "peer-node"
	peerCfg.Volumes = append(peerCfg.Volumes[:1], node.Volume{Name: "peer-only", Dir: t.TempDir()})
	peer := startNode(t, peerCfg)
	cfg := volumeConfig(t)
	cfg.Mesh = staticMesh{peer}
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root, err := client(t, n, rootToken).Volumes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sandboxd.Volume{}
	for _, v := range root {
		got[v.Name] = v
	}
	if got["imagenet"].Nodes != 2 || got["scratch-db"].Nodes != 1 {
		t.Errorf("nodes: imagenet %d, scratch-db %d; want 2 and 1", got["imagenet"].Nodes, got["scratch-db"].Nodes)
	}
	if po := got["peer-only"]; po != (sandboxd.Volume{Name: "peer-only", DefaultMount: "/volumes/peer-only", Nodes: 1}) {
		t.Errorf("peer-only row = %+v, want unavailable, unsized, not writable", po)
	}
	b, _ := client(t, n, tenantB).Volumes(ctx)
	if strings.Contains(strings.Join(volumeNames(b), ","), "peer-only") {
		t.Errorf("a tenant sees a peer-only name: %v", volumeNames(b))
	}
}

func TestVolumeClaimEchoRowAndBusyRules(t *testing.T) {
	n := startNode(t, volumeConfig(t))
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	writer, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{
		{Name: "imagenet"}, {Name: "scratch-db", Mount: "/data/db", Mode: "rw"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	wantVols := []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/volumes/imagenet"}, {Name: "scratch-db", Mount: "/data/db", Mode: "rw"}}
	if !reflect.DeepEqual(writer.Volumes, wantVols) {
		t.Errorf("claim echo %+v, want %+v", writer.Volumes, wantVols)
	}
	row, err := root.Sandbox(ctx, writer.ID)
	if err != nil || !reflect.DeepEqual(row.Volumes, wantVols) {
		t.Errorf("index row volumes %+v (%v), want %+v", row.Volumes, err, wantVols)
	}

	// A live writer excludes every other claim of the name.
	for _, mode := range []string{"", "ro", "rw"} {
		_, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "scratch-db", Mode: mode}}})
		wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	}
	// Readers share a name, and exclude a writer until the last one goes.
	r1, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/models"}}})
	if err != nil {
		t.Fatalf("second reader: %v", err)
	}
	if err := root.Release(ctx, writer.ID); err != nil {
		t.Fatal(err)
	}
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "scratch-db", Mode: "ro"}}})
	if err != nil {
		t.Fatalf("a reader after the writer's release: %v", err)
	}
	_, err = root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "scratch-db", Mode: "rw"}}})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	for _, id := range []string{cl.ID, r1.ID} {
		if err := root.Release(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	// A claim refused after admission (an unknown size) holds nothing.
	_, err = root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Size: "enormous", Volumes: []sandboxd.VolumeMount{{Name: "scratch-db", Mode: "rw"}}})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	w2, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "scratch-db", Mode: "rw"}}})
	if err != nil {
		t.Fatalf("a writer once every holder left: %v", err)
	}

	// Neither hibernate, fork, checkpoint nor promote takes a volume sandbox.
	own := client(t, n, w2.Token)
	wantStatus(t, own.Hibernate(ctx, w2.ID), http.StatusConflict, sandboxd.ErrConflict)
	_, err = root.Fork(ctx, w2.ID, sandboxd.ForkRequest{Token: w2.Token, Count: 1})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	_, err = root.Checkpoint(ctx, w2.ID, sandboxd.CheckpointRequest{Token: w2.Token})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	_, err = root.Promote(ctx, w2.ID, sandboxd.PromoteRequest{Token: w2.Token, Template: "vol:v1"})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
}

func TestVolumeClaimRefusals(t *testing.T) {
	n := startNode(t, volumeConfig(t))
	ctx := ctxT(t)
	b := client(t, n, tenantB)
	nine := make([]sandboxd.VolumeMount, 9)
	for i := range nine {
		nine[i] = sandboxd.VolumeMount{Name: "imagenet", Mount: "/m/" + string(rune('a'+i))}
	}
	for name, req := range map[string]sandboxd.ClaimRequest{
		"nine volumes":        {Volumes: nine},
		"a name twice":        {Volumes: []sandboxd.VolumeMount{{Name: "imagenet"}, {Name: "imagenet", Mount: "/other"}}},
		"relative mount":      {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "data"}}},
		"unclean mount":       {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/data/../x"}}},
		"mount on /":          {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/"}}},
		"inside the OS tree":  {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/usr/share/data"}}},
		"same mount":          {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/d"}, {Name: "scratch-db", Mount: "/d"}}},
		"nesting mounts":      {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/d"}, {Name: "scratch-db", Mount: "/d/e"}}},
		"unknown mode":        {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mode: "wo"}}},
		"rw on read-only":     {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mode: "rw"}}},
		"attach-only, none":   {VolumesAttachOnly: true},
		"attach-only, mount":  {VolumesAttachOnly: true, Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/d"}}},
		"unknown volume":      {Volumes: []sandboxd.VolumeMount{{Name: "nope"}}},
		"another's volume":    {Volumes: []sandboxd.VolumeMount{{Name: "private"}}},
		"not a catalog name":  {Volumes: []sandboxd.VolumeMount{{Name: "../etc"}}},
		"control in a mount":  {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/d\x00x"}}},
		"under /proc nesting": {Volumes: []sandboxd.VolumeMount{{Name: "imagenet", Mount: "/proc"}}},
	} {
		req.Template = tmpl
		_, err := b.Claim(ctx, req)
		if sandboxd.StatusOf(err) != http.StatusBadRequest {
			t.Errorf("%s: %v, want 400", name, err)
		}
	}
	// Unknown and forbidden read the same, bar the name the caller sent.
	_, unknown := b.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "private"}}})
	_, forbidden := b.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "prjvate"}}})
	if msg := strings.ReplaceAll(unknown.Error(), "private", "prjvate"); msg != forbidden.Error() {
		t.Errorf("forbidden %q and unknown %q differ", unknown, forbidden)
	}
	// The access list's tenant claims it.
	if _, err := client(t, n, tenantA).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "private", Mode: "rw"}}}); err != nil {
		t.Errorf("team-a claims its own volume: %v", err)
	}
	if rows, err := client(t, n, rootToken).Sandboxes(ctx, ""); err != nil || len(rows) != 1 {
		t.Errorf("%d claims live (%v), want only team-a's", len(rows), err)
	}
}

// An attach-only claim echoes no mounts and is held like any other.
func TestVolumeAttachOnly(t *testing.T) {
	n := startNode(t, volumeConfig(t))
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, VolumesAttachOnly: true, Volumes: []sandboxd.VolumeMount{
		{Name: "imagenet", Mode: "ro"}, {Name: "scratch-db", Mode: "rw"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	want := []sandboxd.VolumeMount{{Name: "imagenet"}, {Name: "scratch-db", Mode: "rw"}}
	if !reflect.DeepEqual(cl.Volumes, want) {
		t.Errorf("attach-only echo %+v, want %+v", cl.Volumes, want)
	}
	_, err = root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Volumes: []sandboxd.VolumeMount{{Name: "scratch-db"}}})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
}
