package e2b_test

import (
	"net/http"
	"strings"
	"testing"
)

// One key's endless builds, more than there are slots, leave another
// key's build free to start and finish; the first key's queued build
// says where it stands.
func TestBuildSlotsAreSharedAcrossNamespaces(t *testing.T) {
	e := newEnv(t, envOptions{config: withBuilds(t, 2)})
	var greedy []buildRequested
	for _, name := range []string{"endless-1", "endless-2", "endless-3"} {
		req := e.requestBuild(t, keyA, name)
		if r := e.startBuild(t, keyA, req, "sleep 600"); r.status != http.StatusAccepted {
			t.Fatalf("start %s = %d %s, want 202", name, r.status, r.body)
		}
		greedy = append(greedy, req)
	}
	other := e.requestBuild(t, keyB, "mine")
	if r := e.startBuild(t, keyB, other, "echo other-key-ran"); r.status != http.StatusAccepted {
		t.Fatalf("another key's start = %d %s, want 202", r.status, r.body)
	}
	if st := e.waitBuild(t, keyB, other); st.Status != "ready" || !strings.Contains(st.logText(), "other-key-ran") {
		t.Fatalf("another key's build ended %s:\n%s", st.Status, st.logText())
	}
	if st := e.status(t, keyA, greedy[2]); st.Status != "waiting" || st.Reason == nil || !strings.Contains(st.Reason.Message, "position") {
		t.Errorf("the first key's third build: %s %+v, want waiting with its position", st.Status, st.Reason)
	}
	for _, req := range greedy {
		if r := e.do(t, http.MethodDelete, "/templates/"+req.TemplateID, keyA, nil); r.status != http.StatusNoContent {
			t.Errorf("delete %s = %d %s", req.TemplateID, r.status, r.body)
		}
	}
	if n := e.live(t); n != 0 {
		t.Errorf("%d sandboxes claimed after the endless builds were deleted, want 0", n)
	}
}
