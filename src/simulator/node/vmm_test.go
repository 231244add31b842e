package node_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
)

// usageEvents collects a node's usage events on a channel, so a test waits
// for the one it expects instead of polling.
func usageEvents(cfg *node.Config) <-chan node.UsageEvent {
	ch := make(chan node.UsageEvent, 64)
	cfg.Usage = func(ev node.UsageEvent) { ch <- ev }
	return ch
}

// waitEvent returns the next event of sandbox id named ev, failing the
// test when none comes within waitTimeout.
func waitEvent(t *testing.T, events <-chan node.UsageEvent, id, ev string) node.UsageEvent {
	t.Helper()
	timeout := time.After(waitTimeout)
	for {
		select {
		case got := <-events:
			if got.ID == id && got.Ev == ev {
				return got
			}
		case <-timeout:
			t.Fatalf("no %s event for %s within %s", ev, id, waitTimeout)
		}
	}
}

// checkFailed asserts what a failed sandbox looks like through the API:
// its row says failed, info counts it, the verbs that need its guest
// answer 409 naming the failure, and the publisher's phase is Failed.
func checkFailed(t *testing.T, n *node.Node, cl *sandboxd.Claim) {
	t.Helper()
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	row, err := root.Sandbox(ctx, cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(row.Failed, "vmm exited") {
		t.Errorf("row.failed = %q, want the reason the VMM is down", row.Failed)
	}
	rows, err := root.Sandboxes(ctx, "")
	if err != nil || len(rows) != 1 || rows[0].Failed != row.Failed {
		t.Errorf("index = %+v, %v; want the one failed row", rows, err)
	}
	info, err := root.Info(ctx)
	if err != nil || info.Failed != 1 || info.Claimed != 1 {
		t.Errorf("info = %+v, %v; want failed 1 of claimed 1", info, err)
	}
	own := root.As(cl.Token)
	_, err = own.Exec(ctx, cl.ID, sandboxd.ExecRequest{Argv: []string{"true"}})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	if !strings.Contains(err.Error(), "failed") {
		t.Errorf("exec on a failed sandbox: %v, want the failure named", err)
	}
	_, err = own.DialPort(ctx, cl.ID, echoPort)
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	wantStatus(t, root.Hibernate(ctx, cl.ID), http.StatusConflict, sandboxd.ErrConflict)
	snap := n.Snapshot()
	if len(snap.Entries) != 1 || snap.Entries[0].Phase != node.PhaseFailed {
		t.Errorf("snapshot entries = %+v, want one in phase Failed", snap.Entries)
	}
}

func TestKilledVMMFailsTheSandboxAndWakeBootsItAgain(t *testing.T) {
	cfg := testConfig()
	events := usageEvents(&cfg)
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, err := client(t, n, tenantA).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.KillVMM(cl.ID); err != nil {
		t.Fatal(err)
	}
	exit := waitEvent(t, events, cl.ID, node.EventVMMExit)
	failed := waitEvent(t, events, cl.ID, node.EventVMMFailed)
	if exit.VM == "" || failed.VM != exit.VM || failed.Ref == "" {
		t.Errorf("events = %+v, %+v; want both naming the VM and vmm_failed its reason", exit, failed)
	}
	checkFailed(t, n, cl)
	if c := n.Counters(); c.VMMExits != 1 || c.VMMFailures != 1 {
		t.Errorf("counters: vmm exits %d, failures %d; want 1 and 1", c.VMMExits, c.VMMFailures)
	}

	// A failed claim still counts against its tenant's max_claims (3):
	// it is a live claim until it is released.
	for range 2 {
		if _, err := client(t, n, tenantA).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
			t.Fatal(err)
		}
	}
	_, err = client(t, n, tenantA).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)

	// Wake boots it again from its disk: serviceable, the guest reachable.
	if err := root.Wake(ctx, cl.ID); err != nil {
		t.Fatalf("wake of a failed sandbox: %v", err)
	}
	row, err := root.Sandbox(ctx, cl.ID)
	if err != nil || row.Failed != "" {
		t.Fatalf("after wake: row %+v, %v; want it serviceable", row, err)
	}
	conn, err := root.As(cl.Token).DialPort(ctx, cl.ID, echoPort)
	if err != nil {
		t.Fatalf("relay after wake: %v", err)
	}
	_ = conn.Close()

	// Release frees the claim, failed or not.
	if err := n.KillVMM(cl.ID); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, cl.ID, node.EventVMMFailed)
	if err := root.Release(ctx, cl.ID); err != nil {
		t.Fatalf("release of a failed sandbox: %v", err)
	}
	if _, err := client(t, n, tenantA).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl}); err != nil {
		t.Fatalf("claim after the failed sandbox's release: %v", err)
	}
}

func TestFailedSandboxIsDestroyedAtItsDeadlineEvenUnderArchive(t *testing.T) {
	cfg := testConfig()
	clk := newFakeClock()
	cfg.Clock = clk
	cfg.ReapInterval = time.Hour // the test reaps
	events := usageEvents(&cfg)
	n := startNode(t, cfg)
	ctx := ctxT(t)
	cl, err := client(t, n, rootToken).Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 60, OnExpire: sandboxd.ExpireArchive})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.KillVMM(cl.ID); err != nil {
		t.Fatal(err)
	}
	waitEvent(t, events, cl.ID, node.EventVMMFailed)
	clk.Step(61 * time.Second)
	if got := n.ReapExpired(); got != 1 {
		t.Fatalf("reaped %d, want the failed sandbox (it has no VM to archive)", got)
	}
}
