//go:build linux

package simfleet_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const ciTemplate = "e2b-ci:latest"

// startCodeInterpreterFleet is one isolated node with a warm pool of the
// code-interpreter template. The layer is provisioned by tools/bazel
// (tools/build/rootfs-ci.sh); without it the test fails rather than skips,
// so CI cannot pass without exercising the guest.
func startCodeInterpreterFleet(t testing.TB) *simfleet.Fleet {
	t.Helper()
	base, err := rootfs.Base()
	if err != nil {
		t.Fatal(err)
	}
	layer, err := rootfs.CodeInterpreter(base)
	if err != nil {
		t.Fatal(err)
	}
	rt, err := isolate.New(isolate.Config{StateDir: t.TempDir(), CgroupParent: "sandbox-operator-ci-test-" + strconv.Itoa(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, simfleet.Config{
		Pools:     []sandboxd.PoolSpec{{Template: ciTemplate, Warm: 1}},
		Envd:      &simfleet.EnvdConfig{Secret: envdSecret},
		Isolation: &simfleet.IsolationConfig{Runtime: rt, RootFS: base, CodeInterpreter: layer},
	})
	t.Cleanup(func() { _ = rt.Close() })
	if err := f.Node(0).WaitWarm(ctxT(t), sandbox.PoolKey{Template: ciTemplate}.WithDefaults(), 1); err != nil {
		t.Fatalf("the code-interpreter pool never held a started machine: %v", err)
	}
	return f
}

func TestIsolatedCodeInterpreter(t *testing.T) {
	f := startCodeInterpreterFleet(t)
	root := clientFor(t, f.Node(0), rootToken)
	cl, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: ciTemplate, ClaimRef: "default/ci"})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	ci := newCIVia(t, root, cl, accessToken(cl.Token))

	t.Run("health", func(t *testing.T) {
		if st, b := newCIVia(t, root, cl, "").do(ctxT(t), t, http.MethodGet, "/health", nil); st != http.StatusOK || strings.TrimSpace(string(b)) != `"OK"` {
			t.Fatalf("GET /health without a token = %d %q, want 200 \"OK\"", st, b)
		}
	})

	t.Run("access token", func(t *testing.T) {
		for name, token := range map[string]string{"none": "", "wrong": "not-the-token"} {
			st, _ := newCIVia(t, root, cl, token).do(ctxT(t), t, http.MethodPost, "/execute", map[string]any{"code": "1"})
			if st != http.StatusUnauthorized {
				t.Errorf("execute with %s token = %d, want 401", name, st)
			}
			st, _ = newCIVia(t, root, cl, token).do(ctxT(t), t, http.MethodGet, "/contexts", nil)
			if st != http.StatusUnauthorized {
				t.Errorf("list contexts with %s token = %d, want 401", name, st)
			}
		}
		// @e2b/code-interpreter sends e2b's traffic token, not the access
		// token, on its context calls: it is derived from the access token
		// (envdtoken.Traffic), so the guest checks it as well.
		viaTraffic := func(token string) *ciVia {
			v := newCIVia(t, root, cl, "")
			v.hc.Transport = tokenTransport{base: v.hc.Transport, token: token, header: "E2B-Traffic-Access-Token"}
			return v
		}
		if st, raw := viaTraffic(envdtoken.Traffic(accessToken(cl.Token))).do(ctxT(t), t, http.MethodGet, "/contexts", nil); st != http.StatusOK {
			t.Errorf("list contexts with the traffic token = %d %s, want 200", st, raw)
		}
		for name, token := range map[string]string{"a wrong traffic token": "0f0f", "the access token as the traffic token": accessToken(cl.Token)} {
			if st, _ := viaTraffic(token).do(ctxT(t), t, http.MethodGet, "/contexts", nil); st != http.StatusUnauthorized {
				t.Errorf("list contexts with %s = %d, want 401", name, st)
			}
		}
	})

	t.Run("state across cells and the main result", func(t *testing.T) {
		ci.run(t, map[string]any{"code": "shared = 41"})
		lines := ci.run(t, map[string]any{"code": "shared + 1"})
		if r, ok := mainResult(lines); !ok || r.Text != "42" {
			t.Fatalf("shared + 1 answered %+v, want the main result 42", lines)
		}
		var count int
		for _, l := range lines {
			if l.Type == "number_of_executions" {
				count = l.ExecutionCount
			}
		}
		if count < 2 {
			t.Errorf("execution count %d after two cells", count)
		}
	})

	t.Run("stdout streams while the cell runs", func(t *testing.T) {
		// The cell prints, then waits until a second context creates a
		// file, which the test only does once it has the line: a server
		// that held output until the cell's end would never end it.
		other := createContext(t, ci)
		var order []string
		err := ci.stream(ctxT(t), map[string]any{"code": "import os, time\nprint('first line', flush=True)\n" +
			"while not os.path.exists('/tmp/ci-test-go'):\n    time.sleep(0.02)\nprint('second line')"},
			func(l ciLine) {
				switch l.Type {
				case "stdout":
					order = append(order, strings.TrimSpace(l.Text))
					if strings.Contains(l.Text, "first line") {
						ci.run(t, map[string]any{"code": "open('/tmp/ci-test-go', 'w').close()", "context_id": other})
					}
				case "end_of_execution":
					order = append(order, "end")
				}
			})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(order, "|") != "first line|second line|end" {
			t.Fatalf("lines arrived as %q", order)
		}
	})

	t.Run("stderr", func(t *testing.T) {
		lines := ci.run(t, map[string]any{"code": "import sys; print('to stderr', file=sys.stderr)"})
		found := false
		for _, l := range lines {
			found = found || (l.Type == "stderr" && strings.Contains(l.Text, "to stderr"))
		}
		if !found {
			t.Fatalf("no stderr line: %+v", lines)
		}
	})

	t.Run("DataFrame has an HTML result", func(t *testing.T) {
		lines := ci.run(t, map[string]any{"code": "import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})"})
		r, ok := mainResult(lines)
		if !ok || !strings.Contains(r.HTML, "<table") || !strings.Contains(r.Text, "a  b") {
			t.Fatalf("DataFrame answered %+v, want text and an HTML table", lines)
		}
	})

	t.Run("matplotlib figure is a PNG", func(t *testing.T) {
		lines := ci.run(t, map[string]any{"code": "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()"})
		var png []byte
		for _, l := range lines {
			if l.Type == "result" && l.PNG != "" {
				if png, err = base64.StdEncoding.DecodeString(l.PNG); err != nil {
					t.Fatalf("png is not base64: %v", err)
				}
			}
		}
		if !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
			t.Fatalf("no PNG result (%d bytes): %+v", len(png), lines)
		}
	})

	t.Run("an exception is the error with its traceback", func(t *testing.T) {
		lines := ci.run(t, map[string]any{"code": "def boom():\n    return 1 / 0\nboom()"})
		e, ok := errorLine(lines)
		if !ok || e.Name != "ZeroDivisionError" || e.Value != "division by zero" ||
			!strings.Contains(e.Traceback, "boom") || !strings.Contains(e.Traceback, "ZeroDivisionError") {
			t.Fatalf("1/0 answered %+v", lines)
		}
		// The cell right after a failing one runs (the kernel aborts
		// nothing).
		lines = ci.run(t, map[string]any{"code": "'after the error'"})
		if r, ok := mainResult(lines); !ok || r.Text != "after the error" {
			t.Fatalf("the cell after the error answered %+v", lines)
		}
	})

	t.Run("env vars apply to their cell only", func(t *testing.T) {
		lines := ci.run(t, map[string]any{"code": "import os; os.environ.get('CI_TEST_VAR')", "env_vars": map[string]string{"CI_TEST_VAR": "set"}})
		if r, ok := mainResult(lines); !ok || r.Text != "set" {
			t.Fatalf("the cell's env var: %+v", lines)
		}
		lines = ci.run(t, map[string]any{"code": "import os; os.environ.get('CI_TEST_VAR', 'unset')"})
		if r, ok := mainResult(lines); !ok || r.Text != "unset" {
			t.Fatalf("the env var outlived its cell: %+v", lines)
		}
	})

	t.Run("a timed-out cell is interrupted and the context stays usable", func(t *testing.T) {
		ci.run(t, map[string]any{"code": "before_timeout = 'kept'"})
		// The SDK's timeout is its own: when it fires, the SDK drops the
		// request. Here it fires once the cell is surely running.
		ctx, cancel := context.WithCancel(ctxT(t))
		defer cancel()
		err := ci.stream(ctx, map[string]any{"code": "import time\nprint('started', flush=True)\ntime.sleep(600)\nafter_timeout = 1"},
			func(l ciLine) {
				if l.Type == "stdout" {
					cancel()
				}
			})
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("the long cell ended with %v, want the client's cancel", err)
		}
		lines := ci.run(t, map[string]any{"code": "(before_timeout, 'after_timeout' in dir())"})
		if r, ok := mainResult(lines); !ok || r.Text != "('kept', False)" {
			t.Fatalf("after the interrupt: %+v", lines)
		}
	})

	t.Run("contexts are separate and restart clears state", func(t *testing.T) {
		a := createContext(t, ci)
		b := createContext(t, ci)
		ci.run(t, map[string]any{"code": "only_in_a = 1", "context_id": a})
		lines := ci.run(t, map[string]any{"code": "only_in_a", "context_id": b})
		if e, ok := errorLine(lines); !ok || e.Name != "NameError" {
			t.Fatalf("context b sees a's variable: %+v", lines)
		}
		lines = ci.run(t, map[string]any{"code": "only_in_a", "context_id": a})
		if r, ok := mainResult(lines); !ok || r.Text != "1" {
			t.Fatalf("context a lost its variable: %+v", lines)
		}

		var listed []map[string]string
		st, raw := ci.do(ctxT(t), t, http.MethodGet, "/contexts", nil)
		if err := json.Unmarshal(raw, &listed); st != http.StatusOK || err != nil {
			t.Fatalf("GET /contexts = %d %s", st, raw)
		}
		ids := map[string]bool{}
		for _, c := range listed {
			ids[c["id"]] = c["language"] == "python"
		}
		if !ids[a] || !ids[b] {
			t.Fatalf("GET /contexts = %s, want %s and %s (python)", raw, a, b)
		}

		if st, raw := ci.do(ctxT(t), t, http.MethodPost, "/contexts/"+a+"/restart", nil); st != http.StatusOK {
			t.Fatalf("restart = %d %s", st, raw)
		}
		lines = ci.run(t, map[string]any{"code": "only_in_a", "context_id": a})
		if e, ok := errorLine(lines); !ok || e.Name != "NameError" {
			t.Fatalf("restart kept the variable: %+v", lines)
		}

		if st, raw := ci.do(ctxT(t), t, http.MethodDelete, "/contexts/"+b, nil); st != http.StatusOK {
			t.Fatalf("delete = %d %s", st, raw)
		}
		if st, _ := ci.do(ctxT(t), t, http.MethodPost, "/execute", map[string]any{"code": "1", "context_id": b}); st != http.StatusNotFound {
			t.Fatalf("execute in a deleted context = %d, want 404", st)
		}
		if st, _ := ci.do(ctxT(t), t, http.MethodPost, "/contexts/"+b+"/restart", nil); st != http.StatusNotFound {
			t.Fatalf("restart of a deleted context = %d, want 404", st)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		for _, c := range []struct {
			body any
			want int
		}{
			{map[string]any{"code": "1", "language": "javascript"}, http.StatusBadRequest},
			{map[string]any{"code": "1", "language": "python", "context_id": "x"}, http.StatusBadRequest},
			{map[string]any{"code": 1}, http.StatusBadRequest},
			{"not an object", http.StatusBadRequest},
		} {
			if st, raw := ci.do(ctxT(t), t, http.MethodPost, "/execute", c.body); st != c.want {
				t.Errorf("execute %v = %d %s, want %d", c.body, st, raw, c.want)
			}
		}
		if st, raw := ci.do(ctxT(t), t, http.MethodPost, "/contexts", map[string]any{"language": "r"}); st != http.StatusBadRequest {
			t.Errorf("a context in R = %d %s, want 400", st, raw)
		}
		lines := ci.run(t, map[string]any{"code": "1 + 1", "language": "python"})
		if r, ok := mainResult(lines); !ok || r.Text != "2" {
			t.Errorf("language python: %+v", lines)
		}
	})
}

// createContext makes a Python context and returns its id.
func createContext(t *testing.T, ci *ciVia) string {
	t.Helper()
	st, raw := ci.do(ctxT(t), t, http.MethodPost, "/contexts", map[string]any{"language": "python"})
	var c struct{ ID, Language, Cwd string }
	if err := json.Unmarshal(raw, &c); st != http.StatusOK || err != nil || c.ID == "" || c.Language != "python" || c.Cwd != "/home/user" {
		t.Fatalf("POST /contexts = %d %s", st, raw)
	}
	return c.ID
}

// Without the code-interpreter layer an isolated node still runs every
// other template, and refuses to boot the code interpreter's.
func TestIsolatedCodeInterpreterNeedsItsLayer(t *testing.T) {
	base, err := rootfs.Base()
	if err != nil {
		t.Fatal(err)
	}
	rt, err := isolate.New(isolate.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, simfleet.Config{
		Envd:      &simfleet.EnvdConfig{Secret: envdSecret},
		Isolation: &simfleet.IsolationConfig{Runtime: rt, RootFS: base},
	})
	t.Cleanup(func() { _ = rt.Close() })
	root := clientFor(t, f.Node(0), rootToken)
	if _, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: ciTemplate}); sandboxd.StatusOf(err) != http.StatusInternalServerError {
		t.Fatalf("claiming the code interpreter without its layer: %v, want a failed provisioning", err)
	}
	if _, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatalf("the base template: %v", err)
	}
}
