package buildsteps

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
	"github.com/cocoonstack/sandbox-operator/src/envdtoken"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

const (
	testRootToken = "buildsteps-root"
	testTemplate  = "base:test"
	testWarm      = 2
)

var testEnvdSecret = []byte("buildsteps-envd-secret")

// shared is one isolated fleet for the whole test binary: machines take a
// while to start, and every test claims a sandbox of its own from it.
var shared struct {
	once  sync.Once
	fleet *simfleet.Fleet
	rt    *isolate.Runtime
	state string
	err   error
}

// sandboxFleet starts the shared fleet on first use: one node whose
// sandboxes are isolated machines over the base root filesystem, with the
// envd guest inside.
func sandboxFleet(t *testing.T) *simfleet.Fleet {
	t.Helper()
	shared.once.Do(func() { shared.err = startFleet() })
	if shared.err != nil {
		t.Fatalf("isolated fleet: %v", shared.err)
	}
	return shared.fleet
}

func startFleet() error {
	base, err := rootfs.Base()
	if err != nil {
		return err
	}
	if shared.state, err = os.MkdirTemp("", "buildsteps-machines-"); err != nil {
		return err
	}
	shared.rt, err = isolate.New(isolate.Config{StateDir: shared.state, CgroupParent: "sandbox-operator-buildsteps-test-" + strconv.Itoa(os.Getpid())})
	if err != nil {
		return err
	}
	shared.fleet, err = simfleet.Start(context.Background(), simfleet.Config{
		RootToken: testRootToken,
		Pools:     []sandboxd.PoolSpec{{Template: testTemplate, Warm: testWarm}},
		EchoPorts: []int{},
		Envd:      &simfleet.EnvdConfig{Secret: testEnvdSecret},
		Isolation: &simfleet.IsolationConfig{Runtime: shared.rt, RootFS: base},
	})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	return shared.fleet.Node(0).WaitWarm(ctx, sandbox.PoolKey{Template: testTemplate}.WithDefaults(), testWarm)
}

// stopFleet closes what startFleet made: the fleet, then the runtime its
// machines ran on, then their state.
func stopFleet() {
	if shared.fleet != nil {
		_ = shared.fleet.Close()
	}
	if shared.rt != nil {
		_ = shared.rt.Close()
	}
	if shared.state != "" {
		_ = os.RemoveAll(shared.state)
	}
}

var claims atomic.Int64

// box is a claimed sandbox: the Guest the runner is given, and a process
// client of its own to look at the results with.
type box struct {
	guest Guest
	pc    processpbconnect.ProcessClient
	token string
}

// claimBox claims a fresh sandbox, hands its envd the access token as the
// e2b surface does (POST /init), and releases it when the test ends.
func claimBox(t *testing.T) *box {
	t.Helper()
	f := sandboxFleet(t)
	node, err := sandboxd.New(f.Node(0).Addr(), sandboxd.WithToken(testRootToken))
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, time.Minute)
	cl, err := node.Claim(ctx, sandboxd.ClaimRequest{Template: testTemplate, ClaimRef: fmt.Sprintf("default/buildsteps-%d", claims.Add(1))})
	if err != nil {
		t.Fatalf("claim: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := node.Release(ctx, cl.ID); err != nil {
			t.Errorf("release %s: %v", cl.ID, err)
		}
	})
	relay := node.As(cl.Token)
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return relay.DialPort(ctx, cl.ID, sandboxd.EnvdPort)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	hc := &http.Client{Transport: tr}
	b := &box{
		guest: Guest{HTTPClient: hc, BaseURL: "http://envd", AccessToken: envdtoken.Derive(testEnvdSecret, cl.Token)},
		pc:    processpbconnect.NewProcessClient(hc, "http://envd"),
		token: envdtoken.Derive(testEnvdSecret, cl.Token),
	}
	b.init(t, ctx)
	return b
}

func (b *box) init(t *testing.T, ctx context.Context) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"accessToken": b.token})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://envd/init", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Access-Token", b.token)
	resp, err := b.guest.HTTPClient.Do(req)
	if err != nil {
		t.Fatalf("envd /init: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("envd /init answered %d", resp.StatusCode)
	}
}

// sh runs script with bash -l as user in the sandbox, independently of the
// package's own client, and returns its stdout and exit code.
func (b *box) sh(t *testing.T, user, script string) (string, int32) {
	t.Helper()
	req := connect.NewRequest(&processpb.StartRequest{Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", script}}})
	req.Header().Set("X-Access-Token", b.token)
	req.Header().Set("Authorization", "Basic "+basic(user))
	s, err := b.pc.Start(testCtx(t, time.Minute), req)
	if err != nil {
		t.Fatalf("%q: %v", script, err)
	}
	defer s.Close()
	var out bytes.Buffer
	exit := int32(-100)
	for s.Receive() {
		ev := s.Msg().GetEvent()
		out.Write(ev.GetData().GetStdout())
		if end := ev.GetEnd(); end != nil {
			exit = end.GetExitCode()
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%q: %v", script, err)
	}
	return out.String(), exit
}

// must runs script and fails the test unless it exits 0; it returns the
// trimmed stdout.
func (b *box) must(t *testing.T, user, script string) string {
	t.Helper()
	out, exit := b.sh(t, user, script)
	if exit != 0 {
		t.Fatalf("%q as %s: exit %d: %s", script, user, exit, out)
	}
	return strings.TrimSpace(out)
}

// noLeftovers fails the test if the runner left its scratch files or
// processes other than want behind.
func (b *box) noLeftovers(t *testing.T) {
	t.Helper()
	if got := b.must(t, "root", "ls -d /tmp/e2b-build-* 2>/dev/null || true"); got != "" {
		t.Errorf("the runner left files behind: %q", got)
	}
}

func basic(user string) string {
	return base64Std(user + ":")
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// logRecorder is a Log that keeps every line.
type logRecorder struct {
	mu    sync.Mutex
	lines []logLine
}

type logLine struct{ step, level, message string }

func (r *logRecorder) log(step, level, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, logLine{step, level, message})
}

func (r *logRecorder) has(step, level, message string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if l == (logLine{step, level, message}) {
			return true
		}
	}
	return false
}

func (r *logRecorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var b strings.Builder
	for _, l := range r.lines {
		fmt.Fprintf(&b, "%s %s %q\n", l.step, l.level, l.message)
	}
	return b.String()
}
