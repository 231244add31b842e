package main

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseVolumeFlags(t *testing.T) {
	noAmbientKubeconfig(t)
	data, scratch := t.TempDir(), t.TempDir()
	o, err := parseFlags([]string{
		"--volume", "imagenet=" + data,
		"--volume", "scratch-db=" + scratch + ",writable,tenants=team-a+org/team.b",
	})
	if err != nil {
		t.Fatal(err)
	}
	vols := o.fleet.Volumes
	if len(vols) != 2 {
		t.Fatalf("volumes = %+v, want two", vols)
	}
	if v := vols[0]; v.Name != "imagenet" || v.Dir != data || v.Writable || v.Tenants != nil {
		t.Errorf("first volume = %+v", v)
	}
	if v := vols[1]; v.Name != "scratch-db" || v.Dir != scratch || !v.Writable || !slices.Equal(v.Tenants, []string{"team-a", "org/team.b"}) {
		t.Errorf("second volume = %+v", v)
	}

	notDir := filepath.Join(data, "missing")
	for _, bad := range [][]string{
		{"--volume", "imagenet"},
		{"--volume", "imagenet=relative/dir"},
		{"--volume", "imagenet=" + notDir},
		{"--volume", "../x=" + data},
		{"--volume", "a=" + data, "--volume", "a=" + scratch},
		{"--volume", "a=" + data + ",writeable"},
		{"--volume", "a=" + data + ",writable,writable"},
		{"--volume", "a=" + data + ",tenants="},
		{"--volume", "a=" + data + ",tenants=x++y"},
	} {
		if _, err := parseFlags(bad); err == nil || !strings.Contains(err.Error(), "--volume") {
			t.Errorf("%q: err %v, want a --volume error", bad, err)
		}
	}
}
