package e2b_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// takeSnapshots snapshots sandbox n times as keyA and returns the first
// snapshot's id.
func takeSnapshots(t *testing.T, e *env, sandbox string, n int) string {
	t.Helper()
	var first struct {
		SnapshotID string `json:"snapshotID"`
	}
	for i := range n {
		r := e.do(t, http.MethodPost, "/sandboxes/"+sandbox+"/snapshots", keyA, map[string]any{})
		if r.status != http.StatusCreated {
			t.Fatalf("snapshot %d = %d %s", i+1, r.status, r.body)
		}
		if i == 0 {
			r.decode(t, &first)
		}
	}
	return first.SnapshotID
}

// A namespace's snapshots are capped: the one past the cap is 429 with a
// message naming the cap, another namespace still snapshots, and a
// delete makes room.
func TestSnapshotCapPerNamespace(t *testing.T) {
	e := newEnv(t, envOptions{config: func(c *e2b.Config) { c.MaxSnapshots = 2 }})
	sb := e.create(t, keyA, nil)
	first := takeSnapshots(t, e, sb.SandboxID, 2)
	r := e.do(t, http.MethodPost, "/sandboxes/"+sb.SandboxID+"/snapshots", keyA, map[string]any{})
	if r.status != http.StatusTooManyRequests || !strings.Contains(r.errorMessage(t), "limit of 2 snapshots") {
		t.Fatalf("snapshot past the cap = %d %s, want 429 naming the cap", r.status, r.body)
	}
	other := e.create(t, keyB, nil)
	if r := e.do(t, http.MethodPost, "/sandboxes/"+other.SandboxID+"/snapshots", keyB, map[string]any{}); r.status != http.StatusCreated {
		t.Fatalf("another namespace's snapshot = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+first, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete snapshot = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodPost, "/sandboxes/"+sb.SandboxID+"/snapshots", keyA, map[string]any{}); r.status != http.StatusCreated {
		t.Fatalf("snapshot after a delete = %d %s", r.status, r.body)
	}
}

// A namespace's snapshots are bounded in bytes too, each counted at its
// size tier's disk (the most it can hold; sandboxd reports no size): past
// the bound a snapshot is 413 naming it, and a delete frees room.
func TestSnapshotBytesPerNamespace(t *testing.T) {
	tier, _ := sandbox.SizeOf(sandbox.DefaultSize)
	disk := int64(tier.DiskMiB) << 20
	e := newEnv(t, envOptions{config: func(c *e2b.Config) { c.MaxSnapshotBytes = 2*disk + disk/2 }})
	sb := e.create(t, keyA, nil)
	first := takeSnapshots(t, e, sb.SandboxID, 2)
	r := e.do(t, http.MethodPost, "/sandboxes/"+sb.SandboxID+"/snapshots", keyA, map[string]any{})
	if want := fmt.Sprintf("at most %d bytes", 2*disk+disk/2); r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.errorMessage(t), want) {
		t.Fatalf("snapshot past the bytes = %d %s, want 413 naming %q", r.status, r.body, want)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+first, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete snapshot = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodPost, "/sandboxes/"+sb.SandboxID+"/snapshots", keyA, map[string]any{}); r.status != http.StatusCreated {
		t.Fatalf("snapshot after a delete = %d %s", r.status, r.body)
	}
}

// A namespace's template uploads are bounded in bytes and in files: past
// either, the upload (or its link) is 413 with a message naming the
// bound; another namespace is not affected.
func TestUploadBoundsPerNamespace(t *testing.T) {
	withBounds := func(c *e2b.Config) {
		withBuilds(t, 2)(c)
		c.Builds.MaxUploadFiles, c.Builds.MaxUploadBytes = 2, 10
	}
	e := newEnv(t, envOptions{config: withBounds})
	one, two := e.requestBuild(t, keyA, "one"), e.requestBuild(t, keyA, "two")
	hash := func(c string) string { return strings.Repeat(c, 64) }
	if r := e.upload(t, keyA, one.TemplateID, hash("a"), "1234"); r.status != http.StatusOK {
		t.Fatalf("first upload = %d %s", r.status, r.body)
	}
	// Bytes count across the namespace's templates: 4 stored, 7 more is
	// past 10.
	r := e.upload(t, keyA, two.TemplateID, hash("b"), "1234567")
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.errorMessage(t), "limit of 10 bytes") {
		t.Fatalf("upload past the byte bound = %d %s, want 413 naming it", r.status, r.body)
	}
	if r := e.upload(t, keyA, two.TemplateID, hash("c"), "123456"); r.status != http.StatusOK {
		t.Fatalf("upload up to the byte bound = %d %s", r.status, r.body)
	}
	r = e.upload(t, keyA, two.TemplateID, hash("d"), "")
	if r.status != http.StatusRequestEntityTooLarge || !strings.Contains(r.errorMessage(t), "limit of 2 uploaded template files") {
		t.Fatalf("upload link past the file bound = %d %s, want 413 naming it", r.status, r.body)
	}
	other := e.requestBuild(t, keyB, "theirs")
	if r := e.upload(t, keyB, other.TemplateID, hash("e"), "123456789"); r.status != http.StatusOK {
		t.Fatalf("another namespace's upload = %d %s", r.status, r.body)
	}
	// Deleting a template frees what it held.
	if r := e.do(t, http.MethodDelete, "/templates/"+one.TemplateID, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	if r := e.upload(t, keyA, two.TemplateID, hash("f"), "1234"); r.status != http.StatusOK {
		t.Fatalf("upload after a delete = %d %s", r.status, r.body)
	}
}
