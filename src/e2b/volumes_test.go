package e2b_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// The SDK's volumes are sandboxd's catalog: Volume.list lists it, a
// create's volumeMounts become the claim's volumes (read-write where the
// catalog allows), and what sandboxd cannot do with a volume sandbox is
// refused with the reason.
func TestVolumesAreTheNodesCatalog(t *testing.T) {
	e := newEnv(t, envOptions{volumes: []node.Volume{
		{Name: "datasets", Dir: t.TempDir()},
		{Name: "scratch", Dir: t.TempDir(), Writable: true},
	}})

	var listed []struct {
		VolumeID string `json:"volumeID"`
		Name     string `json:"name"`
	}
	e.do(t, http.MethodGet, "/volumes", keyA, nil).decode(t, &listed)
	if len(listed) != 2 || listed[0].Name != "datasets" || listed[1].Name != "scratch" || listed[0].VolumeID != "datasets" {
		t.Fatalf("GET /volumes = %+v, want the two catalog volumes", listed)
	}

	c := e.create(t, keyA, map[string]any{"volumeMounts": []map[string]string{
		{"name": "datasets", "path": "/data"}, {"name": "scratch", "path": "/work/scratch"},
	}})
	id, _ := sandbox.CanonicalID(c.SandboxID)
	_, addr := e.claimToken(t, id)
	cl, err := sandboxd.New(addr, sandboxd.WithToken(rootToken))
	if err != nil {
		t.Fatal(err)
	}
	row, err := cl.Sandbox(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	want := []sandboxd.VolumeMount{{Name: "datasets", Mount: "/data"}, {Name: "scratch", Mount: "/work/scratch", Mode: sandboxd.VolumeModeRW}}
	if len(row.Volumes) != 2 || row.Volumes[0] != want[0] || row.Volumes[1] != want[1] {
		t.Fatalf("the claim's volumes = %+v, want %+v", row.Volumes, want)
	}
	var info struct {
		VolumeMounts []struct{ Name, Path string } `json:"volumeMounts"`
	}
	e.do(t, http.MethodGet, "/sandboxes/"+c.SandboxID, keyA, nil).decode(t, &info)
	if len(info.VolumeMounts) != 2 || info.VolumeMounts[1].Path != "/work/scratch" {
		t.Fatalf("info volumeMounts = %+v", info.VolumeMounts)
	}
	// sandboxd never hibernates a sandbox with volumes.
	if r := e.do(t, http.MethodPost, "/sandboxes/"+c.SandboxID+"/pause", keyA, nil); r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(t), "volume") {
		t.Errorf("pause of a volume sandbox = %d %s, want 400 naming volumes", r.status, r.body)
	}

	for name, tc := range map[string]struct {
		body map[string]any
		want string
	}{
		"a volume not in the catalog": {map[string]any{"volumeMounts": []map[string]string{{"name": "nope", "path": "/x"}}}, "catalog"},
		"no path":                     {map[string]any{"volumeMounts": []map[string]string{{"name": "datasets"}}}, "path"},
		"a path in the OS tree":       {map[string]any{"volumeMounts": []map[string]string{{"name": "datasets", "path": "/etc/x"}}}, "OS tree"},
		"pause at the timeout":        {map[string]any{"volumeMounts": []map[string]string{{"name": "datasets", "path": "/d"}}, "autoPause": true}, "paused"},
	} {
		tc.body["templateID"], tc.body["allow_internet_access"] = "base", false
		r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, tc.body)
		if r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(t), tc.want) {
			t.Errorf("%s: create = %d %s, want 400 saying %q", name, r.status, r.body, tc.want)
		}
	}
	for _, m := range []string{http.MethodPost, http.MethodDelete} {
		path := "/volumes"
		if m == http.MethodDelete {
			path += "/datasets"
		}
		if r := e.do(t, m, path, keyA, map[string]any{"name": "x"}); r.status != http.StatusBadRequest || !strings.Contains(r.errorMessage(t), "catalog") {
			t.Errorf("%s %s = %d %s, want 400 naming the catalog", m, path, r.status, r.body)
		}
	}
}
