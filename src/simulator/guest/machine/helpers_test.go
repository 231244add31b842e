package machine_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"connectrpc.com/connect"

	"github.com/cocoonstack/sandbox-operator/src/envd/processpb"
	"github.com/cocoonstack/sandbox-operator/src/envd/processpb/processpbconnect"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/machine"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

var seq atomic.Int64

func requireRoot(t *testing.T) {
	t.Helper()
	// As isolate's tests: the rootless path is not what CI runs, and as
	// root (CI) these tests always run.
	if os.Geteuid() != 0 {
		t.Skip("these tests run sandboxes as root; CI runs them as root")
	}
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// startSandbox starts a warm sandbox running the guest program with cfg
// over the base root filesystem, as user "user" with hostname sb-test.
func startSandbox(t *testing.T, cfg machine.Config) *isolate.Sandbox {
	t.Helper()
	rt, err := isolate.New(isolate.Config{StateDir: filepath.Join(t.TempDir(), "state")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	raw, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := rt.Start(testContext(t), isolate.Spec{
		ID:       fmt.Sprintf("machine-test-%d", seq.Add(1)),
		Hostname: "sb-test",
		RootFS:   baseRootFS,
		User:     "user",
		Program:  machine.Program,
		Config:   raw,
		Stdout:   os.Stderr,
		Stderr:   os.Stderr,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return sb
}

// tokenTransport adds the envd access token, as the SDK does.
type tokenTransport struct {
	base  http.RoundTripper
	token string
}

func (tt tokenTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if tt.token != "" {
		r = r.Clone(r.Context())
		r.Header.Set("X-Access-Token", tt.token)
	}
	return tt.base.RoundTrip(r)
}

// client reaches 127.0.0.1:port inside sb over HTTP/1.1 through the relay.
func client(t *testing.T, sb *isolate.Sandbox, port int, token string) *http.Client {
	tr := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return sb.Dial(ctx, port)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tokenTransport{base: tr, token: token}}
}

// The base URL is arbitrary: every connection goes through the relay.
const envdURL = "http://envd.sandbox"

func processClient(t *testing.T, sb *isolate.Sandbox, token string) processpbconnect.ProcessClient {
	return processpbconnect.NewProcessClient(client(t, sb, machine.EnvdPort, token), envdURL, connect.WithProtoJSON())
}

// result is what one command printed and how it ended.
type result struct {
	stdout, stderr string
	exit           int32
}

// runCommand runs cmd with bash -l -c, as the SDK's commands.run does, and
// waits for its end.
func runCommand(t *testing.T, c processpbconnect.ProcessClient, cmd string) result {
	t.Helper()
	s, err := c.Start(testContext(t), connect.NewRequest(&processpb.StartRequest{
		Process: &processpb.ProcessConfig{Cmd: "/bin/bash", Args: []string{"-l", "-c", cmd}},
	}))
	if err != nil {
		t.Fatalf("start %q: %v", cmd, err)
	}
	defer s.Close()
	var out, errOut bytes.Buffer
	var r result
	ended := false
	for s.Receive() {
		ev := s.Msg().GetEvent()
		if d := ev.GetData(); d != nil {
			out.Write(d.GetStdout())
			errOut.Write(d.GetStderr())
		}
		if e := ev.GetEnd(); e != nil {
			r.exit, ended = e.GetExitCode(), true
		}
	}
	if err := s.Err(); err != nil || !ended {
		t.Fatalf("command %q: stream ended without an end event: %v", cmd, err)
	}
	r.stdout, r.stderr = out.String(), errOut.String()
	return r
}

// mustRun runs cmd and fails unless it exits 0.
func mustRun(t *testing.T, c processpbconnect.ProcessClient, cmd string) string {
	t.Helper()
	r := runCommand(t, c, cmd)
	if r.exit != 0 {
		t.Fatalf("%q exited %d: stdout %q stderr %q", cmd, r.exit, r.stdout, r.stderr)
	}
	return r.stdout
}

// get fetches path from the listener on port inside sb, retrying while
// nothing listens there yet.
func get(t *testing.T, sb *isolate.Sandbox, port int, path string) (int, string) {
	t.Helper()
	c := client(t, sb, port, "")
	var code int
	var body []byte
	poll.UntilNil(t, fmt.Sprintf("GET %s on port %d", path, port), func() error {
		req, err := http.NewRequestWithContext(testContext(t), http.MethodGet, "http://guest"+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := c.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if body, err = io.ReadAll(resp.Body); err != nil {
			t.Fatal(err)
		}
		code = resp.StatusCode
		return nil
	})
	return code, string(body)
}

// sandboxProcesses lists the host pids of every process in sb's PID
// namespace.
func sandboxProcesses(t *testing.T, sb *isolate.Sandbox) []int {
	t.Helper()
	// The init is PID 1 of the namespace, so its own is the sandbox's.
	ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", sb.PID()))
	if err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		if other, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); err == nil && other == ns {
			pids = append(pids, pid)
		}
	}
	return pids
}

// programPID is the host pid of sb's program: the init's first child
// (orphans the init adopts later have higher pids inside; threads take pid
// numbers too, so it is not simply PID 2).
func programPID(t *testing.T, sb *isolate.Sandbox) int {
	t.Helper()
	best, bestInner := 0, 0
	for _, pid := range sandboxProcesses(t, sb) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		var ppid, inner int
		for line := range strings.Lines(string(b)) {
			f := strings.Fields(line)
			switch {
			case len(f) == 2 && f[0] == "PPid:":
				fmt.Sscan(f[1], &ppid)
			case len(f) > 1 && f[0] == "NSpid:":
				fmt.Sscan(f[len(f)-1], &inner)
			}
		}
		if ppid == sb.PID() && (best == 0 || inner < bestInner) {
			best, bestInner = pid, inner
		}
	}
	if best == 0 {
		t.Fatal("the sandbox has no program")
	}
	return best
}

// mountCount is the number of mounts the host sees.
func mountCount(t *testing.T) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Count(string(b), "\n")
}

// gone reports whether pid no longer exists.
func gone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
