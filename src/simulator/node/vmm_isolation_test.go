//go:build linux

package node_test

import (
	"context"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
)

// TestMain lets the test binary be every isolated sandbox's init.
func TestMain(m *testing.M) {
	isolate.Init()
	os.Exit(m.Run())
}

// idleProgram is the machine program of this package's isolated tests: it
// serves nothing and runs until the machine stops.
const idleProgram = "node-test-idle"

func init() {
	isolate.Register(idleProgram, func(ctx context.Context, _ []byte) error {
		<-ctx.Done()
		return nil
	})
}

// isolatedConfig is testConfig with every sandbox a machine over the base
// root filesystem, running idleProgram; it skips where machines cannot run.
func isolatedConfig(t *testing.T) node.Config {
	t.Helper()
	if err := isolate.Available(); err != nil {
		t.Skipf("isolated machines unavailable: %v", err)
	}
	base, err := rootfs.Base()
	if err != nil {
		t.Skipf("no base root filesystem: %v", err)
	}
	rt, err := isolate.New(isolate.Config{StateDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rt.Close() }) // after the node's (cleanups run last first)
	cfg := testConfig()
	cfg.Guests = nil
	cfg.Pools = []sandboxd.PoolSpec{{Template: tmpl, Warm: 1}}
	cfg.Isolation = &node.Isolation{
		Runtime: rt, RootFS: base, Program: idleProgram, ControlPort: 49982,
		// The idle program takes no claim: the hand-over is the node's
		// bookkeeping only.
		Deliver: func(context.Context, func(context.Context, int) (net.Conn, error), string, string) error { return nil },
	}
	return cfg
}

func TestMachineDeathFailsTheSandboxAtOnce(t *testing.T) {
	cfg := isolatedConfig(t)
	events := usageEvents(&cfg)
	n := startNode(t, cfg)
	ctx := ctxT(t)
	cl, err := client(t, n, tenantA).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	// The machine dies as the OOM killer or a crash would end it: SIGKILL
	// to its init from the host, not through the node.
	pid := n.MachinePID(cl.ID)
	if pid <= 0 {
		t.Fatalf("sandbox %s has no machine", cl.ID)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	ev := waitEvent(t, events, cl.ID, node.EventVMMFailed)
	if ev.Ref != "vmm exited (signal: killed)" {
		t.Errorf("vmm_failed ref = %q, want the machine's end named", ev.Ref)
	}
	checkFailed(t, n, cl)

	// A wake boots a fresh machine over the dead one's disk.
	root := client(t, n, rootToken)
	if err := root.Wake(ctx, cl.ID); err != nil {
		t.Fatalf("wake of a failed sandbox: %v", err)
	}
	if got := n.MachinePID(cl.ID); got <= 0 || got == pid {
		t.Fatalf("after wake the machine's pid is %d (the dead one's was %d), want a fresh machine", got, pid)
	}
	row, err := root.Sandbox(ctx, cl.ID)
	if err != nil || row.Failed != "" {
		t.Fatalf("after wake: row %+v, %v; want it serviceable", row, err)
	}
	// A release's own stop of the machine is no failure.
	if err := root.Release(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-events:
		t.Fatalf("release produced %+v", ev)
	default:
	}
	if c := n.Counters(); c.VMMFailures != 1 {
		t.Errorf("vmm failures = %d, want 1", c.VMMFailures)
	}
}
