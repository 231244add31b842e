// Package sdkops_test checks the e2b surface against the operations the
// unmodified e2b JS SDK can call: its own OpenAPI types, as the npm
// package ships them, list every control-plane operation, and none of them
// may reach the surface's catch-all "no such endpoint". An operation this
// project cannot serve still gets a route of its own, answering with a
// status and the reason.
package sdkops_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/tests/nodejs"
)

// operation is one method and path template of the SDK's API.
type operation struct{ method, path string }

var (
	pathLine   = regexp.MustCompile(`^  "(/[^"]*)": \{$`)
	methodLine = regexp.MustCompile(`^    (get|put|post|delete|patch|options|head|trace): \{$`)
	pathParam  = regexp.MustCompile(`\{[^}/]+\}`)
)

// sdkOperations reads the operations of the control-plane API from the
// SDK's type declarations: the first `interface paths` (the second is
// envd's).
func sdkOperations(t *testing.T, dts string) []operation {
	t.Helper()
	start := strings.Index(dts, "\ninterface paths {\n")
	end := strings.Index(dts, "\ninterface components {\n")
	if start < 0 || end < start {
		t.Fatal("the SDK's declarations hold no control-plane `interface paths` before `interface components`")
	}
	var ops []operation
	path := ""
	for _, line := range strings.Split(dts[start:end], "\n") {
		if m := pathLine.FindStringSubmatch(line); m != nil {
			path = m[1]
			continue
		}
		if m := methodLine.FindStringSubmatch(line); m != nil && path != "" {
			ops = append(ops, operation{method: strings.ToUpper(m[1]), path: path})
		}
	}
	return ops
}

// noSandboxes is a fleet view with no node: only routing is looked at.
type noSandboxes struct{}

func (noSandboxes) Nodes() []fleet.Node { return nil }
func (noSandboxes) List(context.Context, string) ([]fleet.Sandbox, error) {
	return nil, nil
}
func (noSandboxes) Find(context.Context, string, string) (fleet.Sandbox, error) {
	return fleet.Sandbox{}, fleet.ErrNotFound
}

func TestEverySDKOperationHasARoute(t *testing.T) {
	project := nodejs.Setup(t, "tests/e2e/js")
	dts, err := os.ReadFile(filepath.Join(project.Dir, "node_modules", "e2b", "dist", "index.d.ts"))
	if err != nil {
		t.Fatalf("the e2b package's type declarations: %v", err)
	}
	ops := sdkOperations(t, string(dts))
	// e2b 2.51 lists 47; far fewer means the declarations changed shape
	// and this test would check nothing.
	if len(ops) < 40 {
		t.Fatalf("read %d operations from the SDK's declarations, want the 47 of e2b 2.51", len(ops))
	}

	f, err := fleet.New(fleet.Config{View: noSandboxes{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.Close)
	keys, err := e2b.ParseAPIKeys([]byte("e2b_0123456789abcdef default\n"), "default")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := e2b.NewServer(e2b.Config{Namespace: "default", Domain: "sandbox.test", EnvdSecret: []byte("s"), Keys: keys}, f, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	mux := http.NewServeMux()
	for _, p := range srv.Routes() {
		mux.HandleFunc(p, func(http.ResponseWriter, *http.Request) {})
	}
	var missing []string
	for _, op := range ops {
		path := pathParam.ReplaceAllStringFunc(op.path, func(p string) string { return "x" + strings.Trim(p, "{}") })
		_, pattern := mux.Handler(httptest.NewRequest(op.method, path, nil))
		switch {
		case pattern == "/" || pattern == "":
			missing = append(missing, op.method+" "+op.path)
		case !sameShape(op.path, pattern):
			// GET /sandboxes/metrics must not be GET /sandboxes/{sandboxID}
			// with the id "metrics".
			missing = append(missing, op.method+" "+op.path+" (taken by "+pattern+")")
		}
	}
	t.Logf("%d operations in the SDK's declarations, %d without a route", len(ops), len(missing))
	if len(missing) > 0 {
		t.Errorf("these SDK operations fall to the catch-all \"no such endpoint\":\n%s", strings.Join(missing, "\n"))
	}
}

// dispatchers are routes whose handler tells apart operations the mux
// cannot: GET /templates/aliases/{alias} and GET /templates/{templateID}/tags
// overlap as patterns, so one route serves both.
var dispatchers = map[string]bool{"GET /templates/{first}/{second}": true}

// sameShape reports whether pattern serves the operation's path itself:
// no fixed segment of the path is taken by a wildcard of the pattern.
func sameShape(opPath, pattern string) bool {
	if dispatchers[pattern] {
		return true
	}
	_, patPath, _ := strings.Cut(pattern, " ")
	ops, pats := strings.Split(opPath, "/"), strings.Split(patPath, "/")
	if len(ops) != len(pats) {
		return false
	}
	for i := range ops {
		literal := !strings.HasPrefix(ops[i], "{")
		wildcard := strings.HasPrefix(pats[i], "{")
		if literal && wildcard {
			return false
		}
	}
	return true
}
