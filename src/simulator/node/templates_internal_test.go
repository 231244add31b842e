package node

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// A template replaced or deleted while a claim copies from it keeps its
// files until that claim is done; the last user removes them. An
// end-to-end test cannot hold a claim inside the copy, so this drives the
// bookkeeping directly.
func TestRetiredTemplateOutlivesItsClones(t *testing.T) {
	n, err := newNode(Config{Name: "internal"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(n.cleanupScratch)
	key := sandbox.PoolKey{Template: "t:1"}.WithDefaults()
	add := func() *promoted {
		dir := filepath.Join(n.scratch, newTemplateDirName())
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		tp := &promoted{rec: sandboxd.TemplateInfo{Key: key}, dir: dir}
		n.mu.Lock()
		n.templates[key] = tp
		n.mu.Unlock()
		return tp
	}
	exists := func(dir string) bool { _, err := os.Stat(dir); return err == nil }

	tp := add()
	n.mu.Lock()
	tp.users += 2 // two clones in flight
	n.mu.Unlock()
	if _, aerr := n.deleteTemplate(caller{kind: callerRoot}, key, "", true); aerr != nil {
		t.Fatal(aerr)
	}
	if n.HasTemplate(key) || !exists(tp.dir) {
		t.Fatalf("deleted: listed %v, files %v; want unlisted with files kept", n.HasTemplate(key), exists(tp.dir))
	}
	n.doneWithTemplate(tp)
	if !exists(tp.dir) {
		t.Fatal("files removed while a clone still copies them")
	}
	n.doneWithTemplate(tp)
	if exists(tp.dir) {
		t.Fatal("the last clone left the retired files behind")
	}

	// Unused, a deleted template's files go at once.
	idle := add()
	if _, aerr := n.deleteTemplate(caller{kind: callerRoot}, key, "", true); aerr != nil || exists(idle.dir) {
		t.Fatalf("idle delete: %v, files kept %v", aerr, exists(idle.dir))
	}
}
