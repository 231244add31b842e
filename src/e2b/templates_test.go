package e2b_test

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/e2b/buildstore"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// withBuilds serves the build API with a directory store.
func withBuilds(t testing.TB, parallel int) func(*e2b.Config) {
	return withBuildsIn(t, parallel, t.TempDir())
}

// withBuildsIn serves the build API with a directory store in root.
func withBuildsIn(t testing.TB, parallel int, root string) func(*e2b.Config) {
	dir, err := buildstore.NewDir(root, []byte("upload-signing-key-of-the-test"), 1<<20, time.Hour, clock.RealClock{})
	if err != nil {
		t.Fatal(err)
	}
	return func(c *e2b.Config) {
		c.Builds = &e2b.BuildConfig{Parallel: parallel, Timeout: 2 * time.Minute, LogLines: 100, Store: dir, Uploads: dir.UploadHandler()}
	}
}

type buildRequested struct {
	TemplateID string   `json:"templateID"`
	BuildID    string   `json:"buildID"`
	Names      []string `json:"names"`
}

type buildStatus struct {
	Status     string `json:"status"`
	LogEntries []struct {
		Level   string `json:"level"`
		Message string `json:"message"`
		Step    string `json:"step"`
	} `json:"logEntries"`
	Reason *struct {
		Message string `json:"message"`
		Step    string `json:"step"`
	} `json:"reason"`
}

// build requests, starts and waits for a build of name with steps, and
// returns its id and final status with every log line.
func (e *env) build(t testing.TB, key, name string, steps []map[string]any) (buildRequested, buildStatus) {
	t.Helper()
	req := e.requestBuild(t, key, name)
	r := e.do(t, http.MethodPost, "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID, key,
		map[string]any{"fromTemplate": "base", "steps": steps, "force": false, "startCmd": nil})
	if r.status != http.StatusAccepted {
		t.Fatalf("start build = %d %s", r.status, r.body)
	}
	return req, e.waitBuild(t, key, req)
}

func (e *env) requestBuild(t testing.TB, key, name string) buildRequested {
	t.Helper()
	r := e.do(t, http.MethodPost, "/v3/templates", key, map[string]any{"name": name})
	if r.status != http.StatusAccepted {
		t.Fatalf("request build = %d %s", r.status, r.body)
	}
	var req buildRequested
	r.decode(t, &req)
	return req
}

func (e *env) waitBuild(t testing.TB, key string, req buildRequested) buildStatus {
	t.Helper()
	var all buildStatus
	poll.UntilNil(t, "build "+req.BuildID+" to finish with its logs read", func() error {
		r := e.do(t, http.MethodGet, "/templates/"+req.TemplateID+"/builds/"+req.BuildID+"/status?logsOffset="+strconv.Itoa(len(all.LogEntries)), key, nil)
		if r.status != http.StatusOK {
			t.Fatalf("build status = %d %s", r.status, r.body)
		}
		var st buildStatus
		r.decode(t, &st)
		all.LogEntries = append(all.LogEntries, st.LogEntries...)
		all.Status, all.Reason = st.Status, st.Reason
		if (st.Status == "ready" || st.Status == "error") && len(st.LogEntries) == 0 {
			return nil
		}
		return fmt.Errorf("build still %s, %d log entries read", st.Status, len(all.LogEntries))
	})
	return all
}

func (s buildStatus) logText() string {
	var b strings.Builder
	for _, e := range s.LogEntries {
		b.WriteString(e.Message + "\n")
	}
	return b.String()
}

// A create naming nothing that exists is e2b's 404, not a cold-booted
// sandbox of an image nobody serves.
func TestCreateOfUnknownTemplateIs404(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, id := range []string{"no-such-template", "ghcr.io/nobody/nothing:1", "ck_doesnotexist"} {
		r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": id, "allow_internet_access": false})
		if r.status != http.StatusNotFound || !strings.Contains(r.errorMessage(t), "not found") {
			t.Errorf("create of %q = %d %s, want 404", id, r.status, r.body)
		}
	}
	if n := e.live(t); n != 0 {
		t.Fatalf("%d sandboxes claimed by refused creates", n)
	}
	// The alias and the pool image itself still create.
	e.create(t, keyA, map[string]any{"templateID": "base"})
	e.create(t, keyA, map[string]any{"templateID": image})
}

// A build runs its steps in a sandbox of its base, publishes it, and a
// create of the template (by name or by id) clones what the steps wrote;
// the template lists, reads and deletes, and another namespace never
// sees it.
func TestBuildPublishesATemplate(t *testing.T) {
	e := newEnv(t, envOptions{config: withBuilds(t, 2)})
	req, st := e.build(t, keyA, "hello", []map[string]any{
		{"type": "RUN", "args": []string{"echo built-by-step > built.txt && echo step-output"}, "force": false},
	})
	if st.Status != "ready" {
		t.Fatalf("build %s: %+v\n%s", st.Status, st.Reason, st.logText())
	}
	if !strings.Contains(st.logText(), "step-output") {
		t.Errorf("the step's output is not in the build log:\n%s", st.logText())
	}
	if n := e.live(t); n != 0 {
		t.Errorf("the build left %d sandboxes claimed", n)
	}
	for _, ref := range []string{"hello", req.TemplateID} {
		sb := e.create(t, keyA, map[string]any{"templateID": ref})
		if sb.TemplateID != req.TemplateID || sb.Alias != "hello" {
			t.Errorf("create of %s reports template %q alias %q, want %q and hello", ref, sb.TemplateID, sb.Alias, req.TemplateID)
		}
		id, _ := sandbox.CanonicalID(sb.SandboxID)
		r := e.envdGet(t, id, sb.EnvdAccessToken, "/files?path=/home/user/built.txt")
		if r.status != http.StatusOK || string(r.body) != "built-by-step\n" {
			t.Errorf("the template's file in a sandbox of it: %d %q", r.status, r.body)
		}
	}
	// Templates asked for with the internet lane cannot be honoured.
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": "hello", "allow_internet_access": true}); r.status != http.StatusBadRequest {
		t.Errorf("create of a template with internet access = %d, want 400", r.status)
	}

	var list []struct {
		TemplateID  string   `json:"templateID"`
		BuildStatus string   `json:"buildStatus"`
		Names       []string `json:"names"`
		CPUCount    int      `json:"cpuCount"`
		MemoryMB    int      `json:"memoryMB"`
	}
	e.do(t, http.MethodGet, "/templates", keyA, nil).decode(t, &list)
	if len(list) != 1 || list[0].TemplateID != req.TemplateID || list[0].BuildStatus != "ready" || list[0].Names[0] != "hello" || list[0].CPUCount != 1 || list[0].MemoryMB != 1024 {
		t.Fatalf("template list %+v", list)
	}
	if r := e.do(t, http.MethodGet, "/templates/"+req.TemplateID, keyA, nil); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(req.BuildID)) {
		t.Errorf("get template = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/templates/aliases/hello", keyA, nil); r.status != http.StatusOK || !bytes.Contains(r.body, []byte(req.TemplateID)) {
		t.Errorf("alias lookup = %d %s", r.status, r.body)
	}

	// Another namespace: the same answers as for a template that does
	// not exist.
	for _, path := range []string{"/templates/" + req.TemplateID, "/templates/aliases/hello"} {
		if r := e.do(t, http.MethodGet, path, keyB, nil); r.status != http.StatusNotFound {
			t.Errorf("GET %s from another namespace = %d, want 404", path, r.status)
		}
	}
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyB, map[string]any{"templateID": "hello", "allow_internet_access": false}); r.status != http.StatusNotFound {
		t.Errorf("create from another namespace = %d, want 404", r.status)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+req.TemplateID, keyB, nil); r.status != http.StatusNotFound {
		t.Errorf("delete from another namespace = %d, want 404", r.status)
	}

	if r := e.do(t, http.MethodDelete, "/templates/"+req.TemplateID, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+req.TemplateID, keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("second delete = %d, want 404", r.status)
	}
	if r := e.do(t, http.MethodGet, "/templates", keyA, nil); strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("list after delete = %s, want []", r.body)
	}
	if r := e.do(t, http.MethodGet, "/templates/"+req.TemplateID, keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("get after delete = %d, want 404", r.status)
	}
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": "hello", "allow_internet_access": false}); r.status != http.StatusNotFound {
		t.Errorf("create after delete = %d, want 404", r.status)
	}
}

// A failing step fails the build with its output and step, and releases
// the build's sandbox; nothing is published.
func TestFailingStepFailsTheBuild(t *testing.T) {
	e := newEnv(t, envOptions{config: withBuilds(t, 2)})
	_, st := e.build(t, keyA, "broken", []map[string]any{
		{"type": "RUN", "args": []string{"echo fine"}},
		{"type": "RUN", "args": []string{"echo about-to-fail; exit 3"}},
		{"type": "RUN", "args": []string{"echo never-runs"}},
	})
	if st.Status != "error" || st.Reason == nil || st.Reason.Step != "2" || !strings.Contains(st.Reason.Message, "3") {
		t.Fatalf("build %s reason %+v", st.Status, st.Reason)
	}
	if !strings.Contains(st.logText(), "about-to-fail") || strings.Contains(st.logText(), "never-runs") {
		t.Errorf("build log:\n%s", st.logText())
	}
	if n := e.live(t); n != 0 {
		t.Errorf("the failed build left %d sandboxes claimed", n)
	}
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": "broken", "allow_internet_access": false}); r.status != http.StatusNotFound {
		t.Errorf("create of a template whose build failed = %d, want 404", r.status)
	}
}

// A start beyond --e2b-build-parallel is accepted and queued: the status
// says waiting and where the build stands, and it runs once a slot frees.
func TestBuildBeyondParallelIsQueued(t *testing.T) {
	e := newEnv(t, envOptions{warm: 4, config: withBuilds(t, 1)})
	slow := e.requestBuild(t, keyA, "slow")
	next := e.requestBuild(t, keyA, "next")
	if r := e.startBuild(t, keyA, slow, "sleep 600"); r.status != http.StatusAccepted {
		t.Fatalf("first start = %d %s", r.status, r.body)
	}
	if r := e.startBuild(t, keyA, next, "echo queued-ran"); r.status != http.StatusAccepted {
		t.Fatalf("start beyond the bound = %d %s, want 202 (queued)", r.status, r.body)
	}
	st := e.status(t, keyA, next)
	if st.Status != "waiting" || st.Reason == nil || !strings.Contains(st.Reason.Message, "position 1") || !strings.Contains(st.logText(), "position 1 in the build queue") {
		t.Fatalf("queued build: %s %+v\n%s", st.Status, st.Reason, st.logText())
	}
	// Deleting the slow template cancels its build and frees the slot.
	if r := e.do(t, http.MethodDelete, "/templates/"+slow.TemplateID, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete of the running build's template = %d %s", r.status, r.body)
	}
	if st := e.waitBuild(t, keyA, next); st.Status != "ready" || !strings.Contains(st.logText(), "queued-ran") {
		t.Fatalf("queued build ended %s:\n%s", st.Status, st.logText())
	}
}

// Requests the build API refuses before any sandbox is claimed.
func TestBuildRefusals(t *testing.T) {
	e := newEnv(t, envOptions{config: withBuilds(t, 2)})
	for _, tc := range []struct {
		name string
		body any
		want int
	}{
		{"bad name", map[string]any{"name": "Not Valid"}, http.StatusBadRequest},
		{"an alias of the alias file", map[string]any{"name": "base"}, http.StatusConflict},
		{"a bad tag", map[string]any{"name": "x", "tags": []string{"Not A Tag"}}, http.StatusBadRequest},
		{"a bad tag in the name", map[string]any{"name": "x:-v1"}, http.StatusBadRequest},
		{"too many tags", map[string]any{"name": "x", "tags": []string{"a", "b", "c", "d", "e", "f", "g", "h"}}, http.StatusBadRequest},
	} {
		if r := e.do(t, http.MethodPost, "/v3/templates", keyA, tc.body); r.status != tc.want {
			t.Errorf("%s: %d %s, want %d", tc.name, r.status, r.body, tc.want)
		}
	}
	req := e.requestBuild(t, keyA, "refusals")
	if r := e.do(t, http.MethodPost, "/v3/templates", keyA, map[string]any{"name": "refusals"}); r.status != http.StatusConflict {
		t.Errorf("a second build of a template in progress = %d, want 409", r.status)
	}
	path := "/v2/templates/" + req.TemplateID + "/builds/" + req.BuildID
	for _, tc := range []struct {
		name string
		body map[string]any
	}{
		{"no base", map[string]any{"steps": []any{}}},
		{"unknown base", map[string]any{"fromTemplate": "nothing-here"}},
		{"image no pool serves", map[string]any{"fromImage": "e2bdev/base"}},
		{"unknown step", map[string]any{"fromTemplate": "base", "steps": []map[string]any{{"type": "FROB", "args": []string{"x"}}}}},
		{"copy without hash", map[string]any{"fromTemplate": "base", "steps": []map[string]any{{"type": "COPY", "args": []string{"a", "/b", "", ""}}}}},
		{"too big for the base", map[string]any{"fromTemplate": "base"}},
	} {
		body := tc.body
		if tc.name == "too big for the base" {
			big := e.do(t, http.MethodPost, "/v3/templates", keyA, map[string]any{"name": "too-big", "cpuCount": 64})
			var b buildRequested
			big.decode(t, &b)
			if r := e.do(t, http.MethodPost, "/v2/templates/"+b.TemplateID+"/builds/"+b.BuildID, keyA, body); r.status != http.StatusBadRequest {
				t.Errorf("%s: %d %s, want 400", tc.name, r.status, r.body)
			}
			continue
		}
		if r := e.do(t, http.MethodPost, path, keyA, body); r.status != http.StatusBadRequest {
			t.Errorf("%s: %d %s, want 400", tc.name, r.status, r.body)
		}
	}
	// Another namespace's build is not found.
	if r := e.do(t, http.MethodGet, path+"/status", keyB, nil); r.status != http.StatusNotFound {
		t.Errorf("status from another namespace = %d, want 404", r.status)
	}
	if r := e.do(t, http.MethodGet, "/templates/"+req.TemplateID+"/files/"+strings.Repeat("a", 64), keyB, nil); r.status != http.StatusNotFound {
		t.Errorf("upload link from another namespace = %d, want 404", r.status)
	}
	if r := e.do(t, http.MethodGet, "/templates/"+req.TemplateID+"/files/not-a-hash", keyA, nil); r.status != http.StatusBadRequest {
		t.Errorf("upload link for a bad hash = %d, want 400", r.status)
	}
	if n := e.live(t); n != 0 {
		t.Errorf("refused builds claimed %d sandboxes", n)
	}
}

// The upload link the API hands out takes the archive through the
// surface's own signed PUT, and then reads as present.
func TestUploadThroughTheSurface(t *testing.T) {
	e := newEnv(t, envOptions{config: withBuilds(t, 2)})
	req := e.requestBuild(t, keyA, "uploads")
	hash := strings.Repeat("ab", 32)
	var link struct {
		Present bool   `json:"present"`
		URL     string `json:"url"`
	}
	r := e.do(t, http.MethodGet, "/templates/"+req.TemplateID+"/files/"+hash, keyA, nil)
	if r.status != http.StatusCreated {
		t.Fatalf("upload link = %d %s", r.status, r.body)
	}
	r.decode(t, &link)
	if link.Present || !strings.HasPrefix(link.URL, e.url+"/e2b-files/") {
		t.Fatalf("link %+v, want a URL on the surface", link)
	}
	if status := e.putLink(t, link.URL, "archive"); status != http.StatusOK {
		t.Fatalf("PUT = %d", status)
	}
	e.do(t, http.MethodGet, "/templates/"+req.TemplateID+"/files/"+hash, keyA, nil).decode(t, &link)
	if !link.Present {
		t.Fatal("the uploaded archive does not read as present")
	}
	// A URL for another archive with this one's signature is refused.
	if status := e.putLink(t, strings.Replace(link.URL, hash, strings.Repeat("cd", 32), 1), "x"); status != http.StatusForbidden {
		t.Errorf("PUT with a signature of another archive = %d, want 403", status)
	}
}

// With builds off the build routes say how to turn them on; the template
// routes still answer.
func TestBuildsOff(t *testing.T) {
	e := newEnv(t, envOptions{})
	if r := e.do(t, http.MethodPost, "/v3/templates", keyA, map[string]any{"name": "x"}); r.status != http.StatusNotImplemented || !strings.Contains(r.errorMessage(t), "--e2b-builds") {
		t.Errorf("POST /v3/templates with builds off = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/templates", keyA, nil); r.status != http.StatusOK || strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("GET /templates with builds off = %d %s", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/templates/aliases/base", keyA, nil); r.status != http.StatusOK {
		t.Errorf("alias of the alias file = %d", r.status)
	}
}

// A snapshot lists in its namespace only, a create from its id starts a
// sandbox with the snapshot's files in the caller's namespace, and after a
// delete it is gone.
func TestCreateFromSnapshot(t *testing.T) {
	e := newEnv(t, envOptions{})
	src := e.create(t, keyA, nil)
	id, _ := sandbox.CanonicalID(src.SandboxID)
	// The guest's disk is its scratch directory here; write into it as a
	// process in the sandbox would.
	if r := e.envdGet(t, id, src.EnvdAccessToken, "/envs"); r.status != http.StatusOK {
		t.Fatalf("envd: %d", r.status)
	}
	wrote := false
	for _, n := range e.fleet.Nodes() {
		if dir, ok := n.ScratchDir(id); ok {
			if err := os.WriteFile(filepath.Join(dir, "state.txt"), []byte("before the snapshot"), 0o600); err != nil {
				t.Fatal(err)
			}
			wrote = true
		}
	}
	if !wrote {
		t.Fatal("the sandbox is on no node")
	}
	var snap struct {
		SnapshotID string `json:"snapshotID"`
	}
	r := e.do(t, http.MethodPost, "/sandboxes/"+src.SandboxID+"/snapshots", keyA, map[string]any{"name": "before"})
	if r.status != http.StatusCreated {
		t.Fatalf("snapshot = %d %s", r.status, r.body)
	}
	r.decode(t, &snap)

	// Another namespace cannot branch it.
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyB, map[string]any{"templateID": snap.SnapshotID, "allow_internet_access": false}); r.status != http.StatusNotFound {
		t.Fatalf("create from another namespace's snapshot = %d %s, want 404", r.status, r.body)
	}
	branch := e.create(t, keyA, map[string]any{"templateID": snap.SnapshotID, "allow_internet_access": nil})
	bid, _ := sandbox.CanonicalID(branch.SandboxID)
	if got := e.envdGet(t, bid, branch.EnvdAccessToken, "/files?path=/home/user/state.txt"); got.status != http.StatusOK || string(got.body) != "before the snapshot" {
		t.Fatalf("the branch's file: %d %q", got.status, got.body)
	}
	// The branch is a sandbox of the caller's namespace like any create.
	if r := e.do(t, http.MethodGet, "/sandboxes/"+branch.SandboxID, keyA, nil); r.status != http.StatusOK {
		t.Errorf("get the branch = %d", r.status)
	}
	if r := e.do(t, http.MethodGet, "/sandboxes/"+branch.SandboxID, keyB, nil); r.status != http.StatusNotFound {
		t.Errorf("get the branch from another namespace = %d, want 404", r.status)
	}
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": snap.SnapshotID, "allow_internet_access": true}); r.status != http.StatusBadRequest {
		t.Errorf("create from a snapshot with internet access = %d, want 400", r.status)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+snap.SnapshotID, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete snapshot = %d", r.status)
	}
	if r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": snap.SnapshotID, "allow_internet_access": false}); r.status != http.StatusNotFound {
		t.Errorf("create from a deleted snapshot = %d, want 404", r.status)
	}
}

// A node that does not answer leaves its templates out of a read: a pool
// image still creates, but a name found nowhere is 503 (it may be on that
// node), not 404.
func TestUnreachableNodeIsNotAMissingTemplate(t *testing.T) {
	e := newEnv(t, envOptions{})
	if err := e.fleet.Node(1).Close(); err != nil {
		t.Fatal(err)
	}
	r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": "maybe-on-the-dead-node", "allow_internet_access": false})
	if r.status != http.StatusServiceUnavailable {
		t.Errorf("create of an unknown template with a node down = %d %s, want 503", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/templates", keyA, nil); r.status != http.StatusOK {
		t.Errorf("list with a node down = %d %s", r.status, r.body)
	}
}

// code-interpreter-v1 is served without an alias file (sandboxd's e2b-ci
// image), but a fleet that pools no e2b-ci answers it 404, as any
// template nobody serves, not a 429 for capacity that will not come.
func TestCodeInterpreterAliasIsBuiltIn(t *testing.T) {
	e := newEnv(t, envOptions{})
	r := e.do(t, http.MethodPost, "/v2/sandboxes", keyA, map[string]any{"templateID": e2b.CodeInterpreterAlias, "allow_internet_access": false})
	if r.status != http.StatusNotFound {
		t.Fatalf("create of %s on a fleet without %s = %d %s, want 404", e2b.CodeInterpreterAlias, e2b.CodeInterpreterImage, r.status, r.body)
	}
	// The alias exists, as e2b's public one does.
	if r := e.do(t, http.MethodGet, "/templates/aliases/"+e2b.CodeInterpreterAlias, keyA, nil); r.status != http.StatusOK {
		t.Fatalf("alias lookup = %d %s", r.status, r.body)
	}
}
