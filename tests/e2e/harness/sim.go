package harness

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

const (
	// simStartTimeout bounds sandboxd-sim's way to printing its nodes.
	simStartTimeout = time.Minute
	// simStopGrace is how long sandboxd-sim gets to stop every sandbox and
	// remove what it made before it is killed.
	simStopGrace = time.Minute
	// releaseTimeout bounds how long CheckNoClaims waits for releases
	// already under way (a kill returns before its node forgets the claim).
	releaseTimeout = 15 * time.Second
)

// SimNode is one node sandboxd-sim serves.
type SimNode struct{ Name, Addr string }

// Sim is a running sandboxd-sim: simulated sandboxd nodes in one process,
// each sandbox (unless --unisolated is given) its own isolated machine.
type Sim struct {
	Nodes []SimNode
	Proc  *testbin.Process
	// killed is set by Kill: the process is meant to be gone at the end.
	killed atomic.Bool
}

// Kill ends the process with SIGKILL, as a node crash would: its nodes
// and their sandboxes vanish without a release.
func (s *Sim) Kill() error {
	s.killed.Store(true)
	return s.Proc.Kill()
}

// Pause stops the process with SIGSTOP, a hung node: its sockets stay open
// and nothing answers. Resume continues it.
func (s *Sim) Pause() error { return syscall.Kill(s.Proc.Pid(), syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (s *Sim) Resume() error { return syscall.Kill(s.Proc.Pid(), syscall.SIGCONT) }

// Addrs are the nodes' host:port addresses.
func (s *Sim) Addrs() []string {
	out := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		out[i] = n.Addr
	}
	return out
}

// Names are the nodes' names.
func (s *Sim) Names() []string {
	out := make([]string, len(s.Nodes))
	for i, n := range s.Nodes {
		out[i] = n.Name
	}
	return out
}

// StartSim runs sandboxd-sim with args (which must ask for nodes nodes) and
// returns once it printed every "NODE <name> <host:port>" line. It is
// stopped with SIGTERM when the test ends, and given simStopGrace to
// release its sandboxes and remove their directories; it must have run
// until then.
func StartSim(t testing.TB, binary, dir string, nodes int, args ...string) *Sim {
	t.Helper()
	p, err := testbin.StartProcess("sandboxd-sim", binary, filepath.Join(dir, "sandboxd-sim.log"), args, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := &Sim{Proc: p}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s", p.LogTail(80))
		}
		if s.killed.Load() {
			return
		}
		// A process a test paused and did not resume would never see the
		// SIGTERM.
		_ = s.Resume()
		if err := p.Stop(simStopGrace); err != nil {
			t.Errorf("stop sandboxd-sim: %v\n%s", err, p.LogTail(40))
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), simStartTimeout)
	defer cancel()
	err = wait.PollUntilContextCancel(ctx, pollEvery, true, func(context.Context) (bool, error) {
		s.Nodes = simNodes(p.LogPath())
		if len(s.Nodes) >= nodes {
			return true, nil
		}
		return false, p.ExitErr()
	})
	if err != nil {
		t.Fatalf("sandboxd-sim printed %d of %d nodes: %v\n%s", len(s.Nodes), nodes, err, p.LogTail(60))
	}
	return s
}

// simNodes reads the NODE lines sandboxd-sim printed so far.
func simNodes(logPath string) []SimNode {
	f, err := os.Open(logPath)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []SimNode
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 3 && fields[0] == "NODE" {
			out = append(out, SimNode{Name: fields[1], Addr: fields[2]})
		}
	}
	return out
}

// CheckNoClaims fails the test (with t.Errorf, so it may run as a cleanup)
// when a node still lists a claimed sandbox (GET /v1/sandboxes with the
// root token) once releases under way had time to land: whatever a suite
// created, and whatever a server claimed for it, must be released by the
// end.
func CheckNoClaims(t testing.TB, token string, addrs []string) {
	t.Helper()
	// Polled with wait rather than poll: this runs as a cleanup, where the
	// failure must be an Errorf that lets the other cleanups run.
	var left []string
	ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
	defer cancel()
	err := wait.PollUntilContextCancel(ctx, pollEvery, true, func(context.Context) (bool, error) {
		left = claimed(token, addrs)
		return len(left) == 0, nil
	})
	if err != nil {
		t.Errorf("sandboxes still claimed on the nodes %v after the suite:\n%s", releaseTimeout, strings.Join(left, "\n"))
	}
}

// claimed lists the nodes' claimed sandboxes, and the nodes that could not
// be asked.
func claimed(token string, addrs []string) []string {
	var left []string
	for _, addr := range addrs {
		c, err := sandboxd.New(addr, sandboxd.WithToken(token))
		if err != nil {
			left = append(left, fmt.Sprintf("%s: %v", addr, err))
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		list, err := c.Sandboxes(ctx, "")
		cancel()
		if err != nil {
			left = append(left, fmt.Sprintf("%s: %v", addr, err))
			continue
		}
		for _, sb := range list {
			left = append(left, fmt.Sprintf("%s: %s (claim %q, template %s, net %s)", addr, sb.ID, sb.ClaimRef, sb.Key.Template, sb.Key.Net))
		}
	}
	return left
}
