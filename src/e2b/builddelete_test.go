package e2b_test

import (
	"context"
	"io/fs"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// startBuild sends req's definition: one RUN step of cmd on base.
func (e *env) startBuild(t testing.TB, key string, req buildRequested, cmd string) response {
	t.Helper()
	return e.do(t, http.MethodPost, "/v2/templates/"+req.TemplateID+"/builds/"+req.BuildID, key,
		map[string]any{"fromTemplate": "base", "steps": []map[string]any{{"type": "RUN", "args": []string{cmd}}}})
}

// status reads a build's status with every log line.
func (e *env) status(t testing.TB, key string, req buildRequested) buildStatus {
	t.Helper()
	r := e.do(t, http.MethodGet, "/templates/"+req.TemplateID+"/builds/"+req.BuildID+"/status", key, nil)
	if r.status != http.StatusOK {
		t.Fatalf("build status = %d %s", r.status, r.body)
	}
	var st buildStatus
	r.decode(t, &st)
	return st
}

// waitLog waits until the build's log holds want.
func (e *env) waitLog(t testing.TB, key string, req buildRequested, want string) {
	t.Helper()
	poll.Until(t, "build log line "+want, func() bool { return strings.Contains(e.status(t, key, req).logText(), want) })
}

// upload stores body as one of the template's archives through the
// surface's link and signed PUT, and returns the PUT's status and body.
func (e *env) upload(t testing.TB, key, templateID, hash, body string) response {
	t.Helper()
	r := e.do(t, http.MethodGet, "/templates/"+templateID+"/files/"+hash, key, nil)
	if r.status != http.StatusCreated {
		return r
	}
	var link struct {
		URL string `json:"url"`
	}
	r.decode(t, &link)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	put, err := http.NewRequestWithContext(ctx, http.MethodPut, link.URL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := e.http.Do(put)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := response{status: resp.StatusCode, header: resp.Header}
	out.body = readAll(t, resp)
	return out
}

// storedFiles lists the regular files under a store's root.
func storedFiles(t testing.TB, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// requestBuildWithUpload requests a build of name as keyA and uploads one
// archive for it.
func (e *env) requestBuildWithUpload(t *testing.T, name string) buildRequested {
	t.Helper()
	req := e.requestBuild(t, keyA, name)
	if r := e.upload(t, keyA, req.TemplateID, strings.Repeat("ab", 32), "archive"); r.status != http.StatusOK {
		t.Fatalf("upload = %d %s", r.status, r.body)
	}
	return req
}

// Deleting a template whose build is blocked in a step cancels the build:
// its sandbox is released, the template and its uploads are gone.
func TestDeleteCancelsARunningBuild(t *testing.T) {
	root := t.TempDir()
	e := newEnv(t, envOptions{config: withBuildsIn(t, 2, root)})
	req := e.requestBuildWithUpload(t, "endless")
	if r := e.startBuild(t, keyA, req, "echo step-entered; sleep 600"); r.status != http.StatusAccepted {
		t.Fatalf("start = %d %s", r.status, r.body)
	}
	e.waitLog(t, keyA, req, "step-entered")
	if n := e.live(t); n != 1 {
		t.Fatalf("the running build holds %d sandboxes, want 1", n)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+req.TemplateID, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete of a template whose build runs = %d %s, want 204", r.status, r.body)
	}
	if n := e.live(t); n != 0 {
		t.Errorf("the canceled build left %d sandboxes claimed", n)
	}
	if r := e.do(t, http.MethodGet, "/templates", keyA, nil); strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("list after delete = %s, want []", r.body)
	}
	if r := e.do(t, http.MethodGet, "/templates/"+req.TemplateID+"/builds/"+req.BuildID+"/status", keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("status of the deleted template's build = %d, want 404", r.status)
	}
	if files := storedFiles(t, root); len(files) != 0 {
		t.Errorf("the deleted template's uploads are still stored: %v", files)
	}
}

// A template whose build failed is listed, so it can be deleted, with
// everything its build uploaded; an upload link handed out before the
// delete stores nothing after it.
func TestDeleteFailedBuildTemplate(t *testing.T) {
	root := t.TempDir()
	e := newEnv(t, envOptions{config: withBuildsIn(t, 2, root)})
	req := e.requestBuildWithUpload(t, "broken")
	late := e.do(t, http.MethodGet, "/templates/"+req.TemplateID+"/files/"+strings.Repeat("cd", 32), keyA, nil)
	var lateLink struct {
		URL string `json:"url"`
	}
	late.decode(t, &lateLink)
	if r := e.startBuild(t, keyA, req, "exit 3"); r.status != http.StatusAccepted {
		t.Fatalf("start = %d %s", r.status, r.body)
	}
	if st := e.waitBuild(t, keyA, req); st.Status != "error" {
		t.Fatalf("build ended %s, want error", st.Status)
	}
	if r := e.do(t, http.MethodGet, "/templates", keyA, nil); !strings.Contains(string(r.body), req.TemplateID) {
		t.Fatalf("the failed build's template is not listed: %s", r.body)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+req.TemplateID, keyA, nil); r.status != http.StatusNoContent {
		t.Fatalf("delete of a failed build's template = %d %s, want 204", r.status, r.body)
	}
	if r := e.do(t, http.MethodGet, "/templates", keyA, nil); strings.TrimSpace(string(r.body)) != "[]" {
		t.Errorf("list after delete = %s, want []", r.body)
	}
	if r := e.do(t, http.MethodDelete, "/templates/"+req.TemplateID, keyA, nil); r.status != http.StatusNotFound {
		t.Errorf("second delete = %d, want 404", r.status)
	}
	if status := e.putLink(t, lateLink.URL, "late"); status != http.StatusNotFound {
		t.Errorf("PUT to a deleted template's upload link = %d, want 404", status)
	}
	if files := storedFiles(t, root); len(files) != 0 {
		t.Errorf("the deleted template's uploads are still stored: %v", files)
	}
}
