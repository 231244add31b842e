package sandboxd_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const (
	templateRoot   = "root"
	templateTenant = "tenant-token"
	templateBase   = "base:24.04"
)

func startTemplateFleet(t *testing.T, nodes int) *simfleet.Fleet {
	t.Helper()
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: nodes, RootToken: templateRoot,
		Tenants: []node.Tenant{{Name: "team", Token: templateTenant}},
		Pools:   []sandboxd.PoolSpec{{Template: templateBase, Warm: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// promoteOn claims a sandbox on n, gives it one file and promotes it as
// name with the given token.
func promoteOn(t *testing.T, n *node.Node, token, name, content string) *sandboxd.PromoteResult {
	t.Helper()
	c, _ := sandboxd.New(n.Addr(), sandboxd.WithToken(token))
	cl, err := c.Claim(ctxT(t), sandboxd.ClaimRequest{Template: templateBase, NoRedirect: true})
	if err != nil {
		t.Fatal(err)
	}
	dir, _ := n.ScratchDir(cl.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "content"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := c.Promote(ctxT(t), cl.ID, sandboxd.PromoteRequest{Token: cl.Token, Template: name})
	if err != nil {
		t.Fatalf("promote %s on %s: %v", name, n.Name(), err)
	}
	return res
}

func TestPromoteInfoAndDelete(t *testing.T) {
	f := startTemplateFleet(t, 1)
	n := f.Node(0)
	ctx := ctxT(t)
	root, _ := sandboxd.New(n.Addr(), sandboxd.WithToken(templateRoot))
	tenant := root.As(templateTenant)

	res := promoteOn(t, n, templateTenant, "app:v1", "hello")
	key := sandbox.PoolKey{Template: "app:v1", Net: sandbox.DefaultNet, Size: sandbox.DefaultSize}
	if res.Key != key || !strings.HasPrefix(res.ContentDigest, "sha256:") || len(res.ContentDigest) != len("sha256:")+64 {
		t.Fatalf("promote = %+v", res)
	}
	info, err := root.Info(ctx)
	if err != nil || len(info.Templates) != 1 {
		t.Fatalf("info: %+v %v", info, err)
	}
	if tp := info.Templates[0]; tp.Key != key || tp.ContentDigest != res.ContentDigest || tp.Tenant != "team" ||
		tp.CreatedAt.IsZero() || tp.CPUCount != 1 || tp.MemTotalBytes != 1<<30 {
		t.Fatalf("info template row = %+v", tp)
	}
	cl, err := tenant.Claim(ctx, sandboxd.ClaimRequest{Template: "app:v1"})
	if err != nil || cl.TemplateDigest != res.ContentDigest {
		t.Fatalf("claim of the template: %+v %v", cl, err)
	}

	_, err = tenant.Promote(ctx, cl.ID, sandboxd.PromoteRequest{Token: cl.Token, Template: "bad name"})
	if !errors.Is(err, sandboxd.ErrBadRequest) {
		t.Fatalf("bad name: %v", err)
	}
	if err := tenant.DeleteTemplate(ctx, key, "sha256:stale"); !errors.Is(err, sandboxd.ErrPrecondition) || sandboxd.StatusOf(err) != http.StatusPreconditionFailed {
		t.Fatalf("stale digest: %v", err)
	}
	// net and size default as a claim's.
	if err := tenant.DeleteTemplate(ctx, sandbox.PoolKey{Template: "app:v1"}, res.ContentDigest); err != nil {
		t.Fatalf("delete: %v", err)
	}
	if err := tenant.DeleteTemplate(ctx, key, ""); !errors.Is(err, sandboxd.ErrNotFound) {
		t.Fatalf("second delete: %v", err)
	}
	if err := tenant.DeleteTemplate(ctx, sandbox.PoolKey{Template: templateBase}, ""); !errors.Is(err, sandboxd.ErrConflict) {
		t.Fatalf("delete of a pool key: %v", err)
	}
}

// The walk moves past a holder that refuses (404: not the caller's
// template there; 412: another build) to the one that deletes it.
func TestDeleteTemplateFollowsTheRedirect(t *testing.T) {
	f := startTemplateFleet(t, 3)
	entry, rootHolder, teamHolder := f.Node(0), f.Node(1), f.Node(2)
	ctx := ctxT(t)
	key := sandbox.PoolKey{Template: "shared:v1"}.WithDefaults()
	rootRes := promoteOn(t, rootHolder, templateRoot, key.Template, "root's build")
	teamRes := promoteOn(t, teamHolder, templateTenant, key.Template, "team's build")
	holds := func(rootWant, teamWant bool) {
		t.Helper()
		if rootHolder.HasTemplate(key) != rootWant || teamHolder.HasTemplate(key) != teamWant {
			t.Fatalf("root holder has it %v (want %v), team holder %v (want %v)",
				rootHolder.HasTemplate(key), rootWant, teamHolder.HasTemplate(key), teamWant)
		}
	}

	root, _ := sandboxd.New(entry.Addr(), sandboxd.WithToken(templateRoot))
	if err := root.DeleteTemplate(ctx, key, "sha256:stale"); !errors.Is(err, sandboxd.ErrPrecondition) {
		t.Fatalf("a digest no holder has: %v", err)
	}
	holds(true, true)
	if err := root.DeleteTemplate(ctx, key, teamRes.ContentDigest); err != nil {
		t.Fatalf("the second holder's digest: %v", err)
	}
	holds(true, false)

	tenant := root.As(templateTenant)
	if err := tenant.DeleteTemplate(ctx, key, ""); !errors.Is(err, sandboxd.ErrNotFound) {
		t.Fatalf("only root's template is left: %v", err)
	}
	promoteOn(t, teamHolder, templateTenant, key.Template, "team's build")
	if err := tenant.DeleteTemplate(ctx, key, ""); err != nil {
		t.Fatalf("past root's template to the tenant's: %v", err)
	}
	holds(true, false)
	if err := root.DeleteTemplate(ctx, key, rootRes.ContentDigest); err != nil {
		t.Fatalf("root's own: %v", err)
	}
	holds(false, false)
}

// What the client sends, and the answers a conforming node never gives.
func TestDeleteTemplateWireAndOddAnswers(t *testing.T) {
	dead, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := dead.Addr().String()
	_ = dead.Close()

	var targetMode atomic.Value // what the redirect target answers
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if r.Method != http.MethodDelete || r.URL.Path != "/v1/templates" || q.Get("no_redirect") != "1" ||
			q.Get("template") != "t:1" || q.Get("net") != "none" || q.Get("size") != "small" || q.Get("digest") != "sha256:d" ||
			r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `{"error":"unexpected request `+r.URL.RawQuery+`"}`)
			return
		}
		switch targetMode.Load() {
		case "redirect":
			_, _ = io.WriteString(w, `{"redirect":["10.0.0.9:7777"]}`)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer target.Close()
	targetAddr := strings.TrimPrefix(target.URL, "http://")
	var entryMode atomic.Value
	entry := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Has("no_redirect") {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		switch entryMode.Load() {
		case "no redirect":
			_, _ = io.WriteString(w, `{}`)
		default:
			_, _ = io.WriteString(w, `{"redirect":["`+deadAddr+`","`+targetAddr+`"]}`)
		}
	}))
	defer entry.Close()
	c, _ := sandboxd.New(strings.TrimPrefix(entry.URL, "http://"), sandboxd.WithToken("tok"))
	key := sandbox.PoolKey{Template: "t:1"}

	// A dead target is skipped; the next one deletes it.
	if err := c.DeleteTemplate(ctxT(t), key, "sha256:d"); err != nil {
		t.Fatalf("dead then deleting target: %v", err)
	}
	targetMode.Store("redirect")
	if err := c.DeleteTemplate(ctxT(t), key, "sha256:d"); err == nil || errors.Is(err, sandboxd.ErrNotFound) {
		t.Fatalf("a target that redirects a no_redirect request: %v", err)
	}
	entryMode.Store("no redirect")
	if err := c.DeleteTemplate(ctxT(t), key, "sha256:d"); err == nil || !strings.Contains(err.Error(), "without a redirect") {
		t.Fatalf("a 200 that names no holder: %v", err)
	}
}
