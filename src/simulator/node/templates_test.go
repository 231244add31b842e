package node_test

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

const promotedName = "myproj:v1"

var promotedKey = sandbox.PoolKey{Template: promotedName, Net: "none", Size: "small"}

// wantDigest is the content digest the contract defines for files (slash
// path → bytes): per file in path order, its path, length and SHA-256.
func wantDigest(files map[string]string) string {
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	h := sha256.New()
	for _, p := range paths {
		fmt.Fprintf(h, "%s\x00%d\x00%x\n", p, len(files[p]), sha256.Sum256([]byte(files[p])))
	}
	return fmt.Sprintf("sha256:%x", h.Sum(nil))
}

// writeDisk makes the sandbox's in-process disk hold exactly files.
func writeDisk(t *testing.T, n *node.Node, id string, files map[string]string) string {
	t.Helper()
	dir, ok := n.ScratchDir(id)
	if !ok {
		t.Fatalf("no sandbox %s", id)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	for rel, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func readDisk(t *testing.T, n *node.Node, id, rel string) string {
	t.Helper()
	dir, _ := n.ScratchDir(id)
	b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
	if err != nil {
		t.Fatalf("%s of %s: %v", rel, id, err)
	}
	return string(b)
}

// templateDirs counts the saved template trees in the node's scratch.
func templateDirs(t *testing.T, n *node.Node) int {
	t.Helper()
	dirs, err := filepath.Glob(filepath.Join(n.ScratchRoot(), "tp_*"))
	if err != nil {
		t.Fatal(err)
	}
	return len(dirs)
}

func TestPromoteThenClaimClonesTheDisk(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	n := startNode(t, cfg)
	ctx := ctxT(t)
	a := client(t, n, tenantA)
	b := client(t, n, tenantB)
	src, err := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	// "a.txt" sorts before "a/b" by whole path, after it by directory walk.
	files := map[string]string{"state.txt": "built", "a/b": "nested", "a.txt": "flat"}
	writeDisk(t, n, src.ID, files)

	res, err := a.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: promotedName})
	if err != nil {
		t.Fatalf("promote: %v", err)
	}
	if res.Key != promotedKey || res.ContentDigest != wantDigest(files) {
		t.Fatalf("promote = %+v, want key %v and digest %s", res, promotedKey, wantDigest(files))
	}

	before := n.Counters()
	cl, err := b.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName, ClaimRef: "team-b/clone"})
	if err != nil {
		t.Fatalf("claim of the promoted key: %v", err)
	}
	if cl.TemplateDigest != res.ContentDigest || cl.ID == src.ID || cl.OwnerAddr != n.Addr() {
		t.Fatalf("clone = %+v, want template_digest %s", cl, res.ContentDigest)
	}
	for rel, body := range files {
		if got := readDisk(t, n, cl.ID, rel); got != body {
			t.Fatalf("clone's %s = %q, want %q", rel, got, body)
		}
	}
	after := n.Counters()
	if after.ClaimsWarm != before.ClaimsWarm || after.ClaimsClone != before.ClaimsClone+1 || after.TemplateClaims != 1 || after.Promotes != 1 {
		t.Fatalf("a template claim is a clone, never a warm VM: before %+v after %+v", before, after)
	}
	if n.WarmCount(baseKey) != 4 {
		t.Fatalf("the unrelated pool lost warm VMs: %d", n.WarmCount(baseKey))
	}
	rows, _ := b.Sandboxes(ctx, "team-b/clone")
	if len(rows) != 1 || rows[0].Key != promotedKey {
		t.Fatalf("the clone is the claimer's, under the promoted key: %+v", rows)
	}

	// The clone writes its own disk; the template and later clones keep
	// the promoted state.
	writeDisk(t, n, cl.ID, map[string]string{"state.txt": "changed"})
	again, err := b.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName, Net: "none", Size: "small"})
	if err != nil || readDisk(t, n, again.ID, "state.txt") != "built" {
		t.Fatalf("second clone: %+v %v", again, err)
	}

	info, err := client(t, n, rootToken).Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	small := sandbox.SizeTiers()["small"]
	want := sandboxd.TemplateInfo{
		Key: promotedKey, ContentDigest: res.ContentDigest, Tenant: "team-a", CreatedAt: clock.Now(),
		CPUCount: small.CPUCount, MemTotalBytes: small.MemoryBytes(),
	}
	if len(info.Templates) != 1 || !reflect.DeepEqual(info.Templates[0], want) {
		t.Fatalf("info templates = %+v, want [%+v]", info.Templates, want)
	}
	metrics, _ := client(t, n, rootToken).Metrics(ctx)
	for _, line := range []string{"sandboxd_templates 1", "sandboxd_promotes_total 1", "sandboxd_template_claims_total 2"} {
		if !strings.Contains(metrics, "\n"+line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
}

func TestRepromoteReplacesTheTemplate(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	a := client(t, n, tenantA)
	root := client(t, n, rootToken)
	src, _ := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	promote := func() string {
		t.Helper()
		res, err := a.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: promotedName})
		if err != nil {
			t.Fatalf("promote: %v", err)
		}
		return res.ContentDigest
	}

	dir := writeDisk(t, n, src.ID, map[string]string{"f": "v1"})
	d1 := promote()
	// Modes and mtimes are not content: the same files give the same digest.
	if err := os.Chmod(filepath.Join(dir, "f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(filepath.Join(dir, "f"), time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if d := promote(); d != d1 {
		t.Fatalf("unchanged tree: digest %s, then %s", d1, d)
	}
	if templateDirs(t, n) != 1 {
		t.Fatalf("a re-promote must remove the replaced files: %d template trees", templateDirs(t, n))
	}

	writeDisk(t, n, src.ID, map[string]string{"f": "v2"})
	d2 := promote()
	writeDisk(t, n, src.ID, map[string]string{"g": "v2"}) // same bytes, another path
	d3 := promote()
	if d2 == d1 || d3 == d2 || d3 != wantDigest(map[string]string{"g": "v2"}) {
		t.Fatalf("digests v1 %s, v2 %s, renamed %s: bytes and paths must both count", d1, d2, d3)
	}
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName})
	if err != nil || cl.TemplateDigest != d3 || readDisk(t, n, cl.ID, "g") != "v2" {
		t.Fatalf("clone after replace: %+v %v", cl, err)
	}
	if dir, _ := n.ScratchDir(cl.ID); fileExists(filepath.Join(dir, "f")) {
		t.Fatal("the clone carries a file of the replaced template")
	}
	if templateDirs(t, n) != 1 || n.Counters().Promotes != 4 {
		t.Fatalf("%d template trees, counters %+v", templateDirs(t, n), n.Counters())
	}

	// A hibernated sandbox is promoted as it is, without waking.
	if err := a.As(src.Token).Hibernate(ctx, src.ID); err != nil {
		t.Fatal(err)
	}
	writeDisk(t, n, src.ID, map[string]string{"f": "asleep"})
	if d := promote(); d != wantDigest(map[string]string{"f": "asleep"}) {
		t.Fatalf("promote of a hibernated sandbox: %s", d)
	}
	row, err := root.Sandbox(ctx, src.ID)
	if err != nil || !row.Hibernated || n.Counters().Wakes != 0 {
		t.Fatalf("promote woke the sandbox: %+v %v, counters %+v", row, err, n.Counters())
	}
}

func TestRequirePromotedAndPoolPrecedence(t *testing.T) {
	cfg := testConfig()
	cfg.Pools = append(cfg.Pools, sandboxd.PoolSpec{Template: "other:1", Warm: 2})
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)

	// No template here: a pooled key is 404, not a warm VM; an unpooled
	// key is 404, not a cold boot.
	for _, tmplName := range []string{tmpl, "nothing:1"} {
		_, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmplName, RequirePromoted: true})
		wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
		var apiErr *sandboxd.APIError
		if !errors.As(err, &apiErr) || apiErr.Message != "unknown template" {
			t.Fatalf("require_promoted miss says %v", err)
		}
	}
	if c := n.Counters(); c.ClaimsWarm+c.ClaimsClone+c.ClaimsCold != 0 || n.WarmCount(baseKey) != 4 {
		t.Fatalf("a require_promoted miss provisioned: %+v", c)
	}

	src, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: "other:1"})
	writeDisk(t, n, src.ID, map[string]string{"f": "promoted"})
	res, err := root.Promote(ctx, src.ID, sandboxd.PromoteRequest{Template: promotedName}) // root by id
	if err != nil {
		t.Fatal(err)
	}
	waitWarm(t, n, sandbox.PoolKey{Template: "other:1"}.WithDefaults(), 2)
	before := n.Counters()
	for _, requirePromoted := range []bool{false, true} {
		cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName, RequirePromoted: requirePromoted})
		if err != nil || cl.TemplateDigest != res.ContentDigest || readDisk(t, n, cl.ID, "f") != "promoted" {
			t.Fatalf("claim (require_promoted %v): %+v %v", requirePromoted, cl, err)
		}
	}
	if c := n.Counters(); c.ClaimsWarm != before.ClaimsWarm || c.ClaimsCold != before.ClaimsCold || c.TemplateClaims != 2 {
		t.Fatalf("template claims took warm VMs or cold-booted: before %+v after %+v", before, c)
	}

	// A pool added for the key wins for ordinary claims; require_promoted
	// still clones the template.
	if _, err := root.SetPools(ctx, append(cfg.Pools, sandboxd.PoolSpec{Template: promotedName, Warm: 1})); err != nil {
		t.Fatal(err)
	}
	waitWarm(t, n, promotedKey, 1)
	warm, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName})
	if err != nil || warm.TemplateDigest != "" || n.Counters().ClaimsWarm != before.ClaimsWarm+1 {
		t.Fatalf("the pool must win: %+v %v %+v", warm, err, n.Counters())
	}
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName, RequirePromoted: true})
	if err != nil || cl.TemplateDigest != res.ContentDigest {
		t.Fatalf("require_promoted next to a pool: %+v %v", cl, err)
	}
	wantStatus(t, root.DeleteTemplate(ctx, promotedKey, ""), http.StatusConflict, sandboxd.ErrConflict)
}

func TestPromoteRefusals(t *testing.T) {
	cfg := testConfig()
	cfg.EgressAttachment = true
	cfg.Pools = append(cfg.Pools, sandboxd.PoolSpec{Template: tmpl, Net: "egress", Warm: 1})
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	a := client(t, n, tenantA)
	b := client(t, n, tenantB)
	sa, _ := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	sb, _ := b.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})

	for _, name := range []string{"", "-lead", ".hidden", "a//b", "a/../b", "..", "has space", "tab\t", "ünï", strings.Repeat("x", 129), "semi;colon"} {
		_, err := a.Promote(ctx, sa.ID, sandboxd.PromoteRequest{Token: sa.Token, Template: name})
		wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	}
	for _, name := range []string{"a", "9", "my-org/proj_x:v1.2", strings.Repeat("x", 128), "a.b/c-d:e"} {
		if _, err := a.Promote(ctx, sa.ID, sandboxd.PromoteRequest{Token: sa.Token, Template: name}); err != nil {
			t.Errorf("name %q: %v", name, err)
		}
	}
	code, body := rawDo(t, http.MethodPost, "http://"+n.Addr()+"/v1/sandboxes/"+sa.ID+"/promote", tenantA, []byte("{not json"), nil)
	if code != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
		t.Fatalf("bad body: %d %s", code, body)
	}

	_, err := client(t, n, unknownTok).Promote(ctx, sa.ID, sandboxd.PromoteRequest{Token: sa.Token, Template: "x:1"})
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	for name, req := range map[string]sandboxd.PromoteRequest{
		"wrong token":         {Token: sb.Token, Template: "x:1"},
		"tenant acting by id": {Template: "x:1"},
		"unknown sandbox":     {Token: sa.Token, Template: "x:1"},
		"garbage token":       {Token: "nope", Template: "x:1"},
	} {
		id := sa.ID
		if name == "unknown sandbox" {
			id = "sb_missing"
		}
		_, err := a.Promote(ctx, id, req)
		wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	}

	eg, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Net: "egress"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = root.Promote(ctx, eg.ID, sandboxd.PromoteRequest{Template: "x:1"})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	if !strings.Contains(err.Error(), "egress-lane sandboxes stay live") {
		t.Fatalf("egress refusal says %v", err)
	}
	// The pooled key (tmpl, none, small) is the pool's, not a template's.
	_, err = a.Promote(ctx, sa.ID, sandboxd.PromoteRequest{Token: sa.Token, Template: tmpl})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)

	// A key belongs to whoever promoted it: team-a replaces its own,
	// team-b and root are refused.
	if _, err := a.Promote(ctx, sa.ID, sandboxd.PromoteRequest{Token: sa.Token, Template: "shared:1"}); err != nil {
		t.Fatal(err)
	}
	_, err = b.Promote(ctx, sb.ID, sandboxd.PromoteRequest{Token: sb.Token, Template: "shared:1"})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	_, err = root.Promote(ctx, sb.ID, sandboxd.PromoteRequest{Template: "shared:1"})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	if _, err := a.Promote(ctx, sa.ID, sandboxd.PromoteRequest{Token: sa.Token, Template: "shared:1"}); err != nil {
		t.Fatalf("re-promote by the owner: %v", err)
	}

	info, _ := root.Info(ctx)
	for _, tp := range info.Templates {
		if tp.Key.Template == "shared:1" && tp.Tenant != "team-a" {
			t.Fatalf("shared:1 changed hands: %+v", tp)
		}
		if tp.Key.Net == "egress" || tp.Key == baseKey {
			t.Fatalf("a refused promote left a template: %+v", tp)
		}
	}
	// Five accepted names plus shared:1; the refusals left no files.
	if len(info.Templates) != 6 || templateDirs(t, n) != 6 || n.Counters().Promotes != 7 {
		t.Fatalf("%d templates, %d trees, counters %+v", len(info.Templates), templateDirs(t, n), n.Counters())
	}
}

func TestDeleteTemplate(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	a := client(t, n, tenantA)
	b := client(t, n, tenantB)
	sa, _ := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	writeDisk(t, n, sa.ID, map[string]string{"f": "x"})
	mine, err := a.Promote(ctx, sa.ID, sandboxd.PromoteRequest{Token: sa.Token, Template: "a:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := root.Promote(ctx, sa.ID, sandboxd.PromoteRequest{Template: "r:1"}); err != nil {
		t.Fatal(err)
	}
	aKey := sandbox.PoolKey{Template: "a:1"}
	rKey := sandbox.PoolKey{Template: "r:1", Net: "none", Size: "small"}

	// Another tenant's template and root's are the same 404 as none.
	wantStatus(t, b.DeleteTemplate(ctx, aKey, ""), http.StatusNotFound, sandboxd.ErrNotFound)
	wantStatus(t, a.DeleteTemplate(ctx, rKey, ""), http.StatusNotFound, sandboxd.ErrNotFound)
	wantStatus(t, a.DeleteTemplate(ctx, sandbox.PoolKey{Template: "a:1", Size: "large"}, ""), http.StatusNotFound, sandboxd.ErrNotFound)
	wantStatus(t, client(t, n, unknownTok).DeleteTemplate(ctx, aKey, ""), http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	wantStatus(t, a.DeleteTemplate(ctx, baseKey, ""), http.StatusConflict, sandboxd.ErrConflict)
	wantStatus(t, a.DeleteTemplate(ctx, aKey, "sha256:"+strings.Repeat("0", 64)), http.StatusPreconditionFailed, sandboxd.ErrPrecondition)
	code, body := rawDo(t, http.MethodDelete, "http://"+n.Addr()+"/v1/templates?net=none", rootToken, nil, nil)
	if code != http.StatusBadRequest || !strings.Contains(body, `"error"`) {
		t.Fatalf("delete without a template: %d %s", code, body)
	}
	if templateDirs(t, n) != 2 {
		t.Fatalf("refused deletes removed files: %d trees", templateDirs(t, n))
	}

	// The owner with the current digest: 204, then 404.
	q := url.Values{"template": {"a:1"}, "digest": {mine.ContentDigest}}
	code, body = rawDo(t, http.MethodDelete, "http://"+n.Addr()+"/v1/templates?"+q.Encode(), tenantA, nil, nil)
	if code != http.StatusNoContent || body != "" {
		t.Fatalf("delete: %d %q", code, body)
	}
	wantStatus(t, a.DeleteTemplate(ctx, aKey, ""), http.StatusNotFound, sandboxd.ErrNotFound)
	if templateDirs(t, n) != 1 {
		t.Fatalf("the deleted template's files stayed: %d trees", templateDirs(t, n))
	}
	// Root deletes anything.
	if err := root.DeleteTemplate(ctx, rKey, ""); err != nil {
		t.Fatal(err)
	}
	if info, _ := root.Info(ctx); len(info.Templates) != 0 || templateDirs(t, n) != 0 {
		t.Fatalf("after deletes: %+v, %d trees", info.Templates, templateDirs(t, n))
	}
	// The key is ordinary again: a claim cold-boots.
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: "a:1"})
	if err != nil || cl.TemplateDigest != "" || n.Counters().ClaimsCold != 1 {
		t.Fatalf("claim after delete: %+v %v %+v", cl, err, n.Counters())
	}
}

// A template held only by a mesh peer: a claim and a delete at this node
// name the holder; no_redirect keeps them here.
func TestTemplateRedirectsToTheHolder(t *testing.T) {
	peerCfg := testConfig()
	peerCfg.Name = "peer-node"
	peer := startNode(t, peerCfg)
	cfg := testConfig()
	cfg.Mesh = staticMesh{peer}
	cfg.Pools = append(cfg.Pools, sandboxd.PoolSpec{Template: "pooled-here:1", Warm: 1})
	n := startNode(t, cfg)
	ctx := ctxT(t)
	atPeer := client(t, peer, rootToken)
	src, _ := atPeer.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	writeDisk(t, peer, src.ID, map[string]string{"f": "peer"})
	res, err := atPeer.Promote(ctx, src.ID, sandboxd.PromoteRequest{Template: promotedName})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := atPeer.Promote(ctx, src.ID, sandboxd.PromoteRequest{Template: "pooled-here:1"}); err != nil {
		t.Fatal(err)
	}
	if !peer.HasTemplate(sandbox.PoolKey{Template: promotedName}) || n.HasTemplate(promotedKey) {
		t.Fatal("HasTemplate must answer for the holder only")
	}

	root := client(t, n, rootToken)
	for _, requirePromoted := range []bool{false, true} {
		raw, err := root.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: promotedName, RequirePromoted: requirePromoted})
		if err != nil || !slices.Equal(raw.Redirect, []string{peer.Addr()}) || !raw.RequirePromoted || raw.ID != "" {
			t.Fatalf("claim at the non-holder: %+v %v", raw, err)
		}
	}
	_, err = root.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: promotedName, RequirePromoted: true, NoRedirect: true})
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	// A key this node pools is never redirected to a template holder:
	// its pool serves it, and require_promoted finds no template here.
	_, err = root.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: "pooled-here:1", RequirePromoted: true})
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	local, err := root.ClaimNoFollow(ctx, sandboxd.ClaimRequest{Template: "pooled-here:1"})
	if err != nil || local.IsRedirect() || local.OwnerAddr != n.Addr() || local.TemplateDigest != "" || n.Counters().ClaimsWarm != 1 {
		t.Fatalf("claim of a key pooled here: %+v %v", local, err)
	}

	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: promotedName})
	if err != nil || cl.OwnerAddr != peer.Addr() || cl.TemplateDigest != res.ContentDigest || readDisk(t, peer, cl.ID, "f") != "peer" {
		t.Fatalf("followed claim: %+v %v", cl, err)
	}

	q := url.Values{"template": {promotedName}}
	code, body := rawDo(t, http.MethodDelete, "http://"+n.Addr()+"/v1/templates?"+q.Encode(), rootToken, nil, nil)
	if code != http.StatusOK || !strings.Contains(body, peer.Addr()) {
		t.Fatalf("delete at the non-holder: %d %s", code, body)
	}
	matchGolden(t, "templates.delete.redirect.response.json", []byte(body), nil)
	q.Set("no_redirect", "1")
	if code, _ := rawDo(t, http.MethodDelete, "http://"+n.Addr()+"/v1/templates?"+q.Encode(), rootToken, nil, nil); code != http.StatusNotFound {
		t.Fatalf("no_redirect delete at the non-holder: %d", code)
	}
	if err := root.DeleteTemplate(ctx, promotedKey, res.ContentDigest); err != nil {
		t.Fatalf("followed delete: %v", err)
	}
	if peer.HasTemplate(promotedKey) {
		t.Fatal("the holder still has the template")
	}
	wantStatus(t, root.DeleteTemplate(ctx, promotedKey, ""), http.StatusNotFound, sandboxd.ErrNotFound)
}

// Template answers have the documented shapes: promote, a clone's claim
// answer (with template_digest) and the require_promoted redirect.
func TestTemplateAnswersMatchTheDocumentedExamples(t *testing.T) {
	peerCfg := testConfig()
	peerCfg.Name = "peer-node"
	peer := startNode(t, peerCfg)
	cfg := testConfig()
	cfg.Mesh = staticMesh{peer}
	n := startNode(t, cfg)
	api := "http://" + n.Addr()

	var cl sandboxd.ClaimResponse
	decode(t, call(t, http.MethodPost, api+"/v1/claim", tenantB, []byte(`{"template":"`+tmpl+`"}`), http.StatusOK), &cl)
	body := call(t, http.MethodPost, api+"/v1/sandboxes/"+cl.ID+"/promote", tenantB, []byte(`{"token":"`+cl.Token+`","template":"myproj:v1"}`), http.StatusOK)
	matchGolden(t, "promote.response.json", body, nil)
	body = call(t, http.MethodPost, api+"/v1/sandboxes/"+cl.ID+"/promote", rootToken, []byte(`{"template":"root:v1"}`), http.StatusOK)
	matchGolden(t, "promote.response.json", body, nil)

	body = call(t, http.MethodPost, api+"/v1/claim", tenantA, []byte(`{"template":"myproj:v1","ttl_seconds":300,"claim_ref":"team-a/clone"}`), http.StatusOK)
	matchGolden(t, "claim.response.json", body, map[string]string{"volumes": whyNoVolumes})

	var pc sandboxd.ClaimResponse
	decode(t, call(t, http.MethodPost, "http://"+peer.Addr()+"/v1/claim", rootToken, []byte(`{"template":"`+tmpl+`"}`), http.StatusOK), &pc)
	call(t, http.MethodPost, "http://"+peer.Addr()+"/v1/sandboxes/"+pc.ID+"/promote", rootToken, []byte(`{"template":"peer:v1"}`), http.StatusOK)
	body = call(t, http.MethodPost, api+"/v1/claim", rootToken, []byte(`{"template":"peer:v1"}`), http.StatusOK)
	matchGolden(t, "claim.redirect.response.json", body, nil)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
