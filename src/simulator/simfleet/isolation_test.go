//go:build linux

package simfleet_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// TestMain lets the test binary be every isolated sandbox's init.
func TestMain(m *testing.M) {
	isolate.Init()
	os.Exit(m.Run())
}

// startIsolatedFleet is one node whose sandboxes are machines over the
// base root filesystem, with the envd guest inside.
func startIsolatedFleet(t *testing.T) (*simfleet.Fleet, *isolate.Runtime) {
	t.Helper()
	base, err := rootfs.Base()
	if err != nil {
		t.Fatal(err)
	}
	state := t.TempDir()
	rt, err := isolate.New(isolate.Config{StateDir: state, CgroupParent: "sandbox-operator-fleet-test-" + strconv.Itoa(os.Getpid())})
	if err != nil {
		t.Fatal(err)
	}
	f := startFleet(t, simfleet.Config{
		Pools:     []sandboxd.PoolSpec{{Template: tmpl, Warm: 2}},
		Envd:      &simfleet.EnvdConfig{Secret: envdSecret},
		Isolation: &simfleet.IsolationConfig{Runtime: rt, RootFS: base},
	})
	t.Cleanup(func() { _ = rt.Close() }) // after the fleet (cleanups run last first)
	if err := f.Node(0).WaitWarm(ctxT(t), sandbox.PoolKey{Template: tmpl}.WithDefaults(), 2); err != nil {
		t.Fatalf("the pool never held 2 started machines: %v", err)
	}
	return f, rt
}

func isolatedClaim(t *testing.T, root *sandboxd.Client, name string) (*sandboxd.Claim, *envdVia) {
	t.Helper()
	cl, err := root.Claim(ctxT(t), sandboxd.ClaimRequest{Template: tmpl, ClaimRef: "default/" + name})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	return cl, newEnvdVia(t, root, cl, accessToken(cl.Token))
}

func run(t *testing.T, e *envdVia, cmd string) string {
	t.Helper()
	out, exit, _, err := runCommand(t, e.process(), cmd)
	if err != nil || exit != 0 {
		t.Fatalf("%q: exit %d, %v: %s", cmd, exit, err, out)
	}
	return strings.TrimSpace(out)
}

func TestIsolatedSandboxesAreMachines(t *testing.T) {
	f, _ := startIsolatedFleet(t)
	root := clientFor(t, f.Node(0), rootToken)
	a, ea := isolatedClaim(t, root, "a")
	b, eb := isolatedClaim(t, root, "b")

	dns, _ := sandbox.DNSID(a.ID)
	if got := run(t, ea, "pwd; id -un; hostname"); got != "/home/user\nuser\n"+dns {
		t.Errorf("pwd, id -un, hostname = %q, want /home/user, user, %s", got, dns)
	}
	repo, _ := os.Getwd()
	if got := run(t, ea, "ls /; test -e "+repo+" && echo HOST-VISIBLE || true"); !strings.Contains(got, "usr") || strings.Contains(got, "HOST-VISIBLE") {
		t.Errorf("ls / inside = %q: want the sandbox's Debian root and not the host's %s", got, repo)
	}

	// Two sandboxes each serve port 8000 with their own content, reached
	// through the relay.
	for _, s := range []struct {
		cl *sandboxd.Claim
		e  *envdVia
	}{{a, ea}, {b, eb}} {
		run(t, s.e, "echo "+s.cl.ID+" > index.html; (python3 -m http.server 8000 >/dev/null 2>&1 &)")
	}
	for _, cl := range []*sandboxd.Claim{a, b} {
		got := getThroughRelay(t, root, cl, 8000, "/index.html")
		if strings.TrimSpace(got) != cl.ID {
			t.Errorf("port 8000 of %s answered %q", cl.ID, got)
		}
	}

	// Nothing of the system the sandbox runs in is reachable from inside:
	// not the node's control API, not a server on the host's loopback (as
	// the e2b API and the data plane are in the local system).
	host := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "host") }))
	defer host.Close()
	for _, target := range []string{"http://" + f.Node(0).Addr() + "/v1/info", host.URL} {
		out, exit, _, err := runCommand(t, ea.process(), "curl -sS -m 3 "+target)
		if err != nil || exit == 0 {
			t.Errorf("from inside the sandbox, %s answered (exit %d, %v): %q", target, exit, err, out)
		}
	}

	// The machine program's control port is never relayed.
	if _, err := root.As(a.Token).DialPort(ctxT(t), a.ID, 49982); err == nil {
		t.Error("the relay reached the machine's control port")
	}
}

func TestIsolatedHibernateFreezesAndForkCopiesTheDisk(t *testing.T) {
	f, rt := startIsolatedFleet(t)
	root := clientFor(t, f.Node(0), rootToken)
	a, ea := isolatedClaim(t, root, "counter")
	run(t, ea, "echo kept > note.txt; (while :; do echo x >> count; sleep 0.05; done >/dev/null 2>&1 &)")
	machine, ok := rt.Lookup(a.ID)
	if !ok {
		t.Fatalf("no machine %s", a.ID)
	}
	counter := filepath.Join(machine.LayerDir(), "home", "user", "count")
	lines := func() int {
		b, _ := os.ReadFile(counter)
		return strings.Count(string(b), "\n")
	}
	poll.Until(t, "the counter to run", func() bool { return lines() > 3 })

	if err := root.Hibernate(ctxT(t), a.ID); err != nil {
		t.Fatal(err)
	}
	frozen := lines()
	// Every task of the machine is frozen: the counter cannot move.
	if err := machine.CheckFrozen(); err != nil {
		t.Fatalf("hibernated: %v", err)
	}
	if err := root.Wake(ctxT(t), a.ID); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the counter to continue after wake", func() bool { return lines() > frozen })

	children, err := root.Fork(ctxT(t), a.ID, sandboxd.ForkRequest{Count: 1})
	if err != nil || len(children) != 1 {
		t.Fatalf("fork: %v, %d children", err, len(children))
	}
	ec := newEnvdVia(t, root, &children[0], accessToken(children[0].Token))
	if got := run(t, ec, "cat note.txt"); got != "kept" {
		t.Errorf("the fork child reads %q from the parent's file", got)
	}
	for _, id := range []string{a.ID, children[0].ID} {
		m, ok := rt.Lookup(id)
		if !ok {
			t.Fatalf("no machine %s", id)
		}
		if err := root.Release(ctxT(t), id); err != nil {
			t.Fatal(err)
		}
		poll.Until(t, "the released machine's directory to go", func() bool {
			_, err := os.Stat(m.Dir())
			return os.IsNotExist(err)
		})
	}
}

func getThroughRelay(t *testing.T, root *sandboxd.Client, cl *sandboxd.Claim, port int, path string) string {
	t.Helper()
	var body string
	poll.Until(t, "port "+strconv.Itoa(port)+" to answer", func() bool {
		conn, err := root.As(cl.Token).DialPort(ctxT(t), cl.ID, port)
		if err != nil {
			return false
		}
		defer conn.Close()
		req, _ := http.NewRequest(http.MethodGet, "http://sandbox"+path, nil)
		req.Close = true
		if err := req.Write(conn); err != nil {
			return false
		}
		b, err := io.ReadAll(conn)
		if err != nil || !strings.HasPrefix(string(b), "HTTP/1.0 200") && !strings.HasPrefix(string(b), "HTTP/1.1 200") {
			return false
		}
		_, body, _ = strings.Cut(string(b), "\r\n\r\n")
		return true
	})
	return body
}
