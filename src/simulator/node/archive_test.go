package node_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// A claim with on_expire archive is archived at its deadline, counted as
// archived, refused the verbs that need its state on the node, and woken
// with a fresh lease of its grant, after which it archives again.
func TestArchiveAtLeaseEndAndWakeWithFreshLease(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	cfg.ReapInterval = time.Hour // the test drives the reaper
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 60, OnExpire: sandboxd.ExpireArchive})
	if err != nil {
		t.Fatal(err)
	}
	if cl.NetRoute != "none" {
		t.Fatalf("net=none claim answered net_route %q", cl.NetRoute)
	}
	own := root.As(cl.Token)

	clock.Step(61 * time.Second)
	if got := n.ReapExpired(); got != 0 {
		t.Fatalf("reaped %d archive claims", got)
	}
	row, err := root.Sandbox(ctx, cl.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !row.Archived || row.Hibernated || row.OnExpire != sandboxd.ExpireArchive {
		t.Fatalf("row after the deadline: %+v", row)
	}
	info, _ := root.Info(ctx)
	if info.Archived != 1 || info.Hibernated != 0 || info.Claimed != 1 {
		t.Fatalf("info: archived %d hibernated %d claimed %d", info.Archived, info.Hibernated, info.Claimed)
	}
	if m, _ := root.Metrics(ctx); !strings.Contains(m, "\nsandboxd_archived 1\n") {
		t.Fatal("metrics do not count the archived claim")
	}
	// Kept forever (no retention configured): more reaps keep it.
	clock.Step(48 * time.Hour)
	n.ReapExpired()
	if _, err := root.Sandbox(ctx, cl.ID); err != nil {
		t.Fatalf("archive kept forever was deleted: %v", err)
	}

	_, err = own.Renew(ctx, cl.ID, 60)
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	_, err = root.Fork(ctx, cl.ID, sandboxd.ForkRequest{Token: cl.Token, Count: 1})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	_, err = root.Checkpoint(ctx, cl.ID, sandboxd.CheckpointRequest{Token: cl.Token})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	_, err = root.Promote(ctx, cl.ID, sandboxd.PromoteRequest{Token: cl.Token, Template: "arch:v1"})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	// The root relay never wakes an archived sandbox.
	_, err = root.DialPort(ctx, cl.ID, echoPort)
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)

	if err := own.Wake(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	row, _ = root.Sandbox(ctx, cl.ID)
	if row.Archived || row.Hibernated || !row.Deadline.Equal(clock.Now().Add(60*time.Second)) {
		t.Fatalf("woken row %+v, want a fresh 60s lease from %s", row, clock.Now())
	}
	if c := n.Counters(); c.Archives != 1 || c.Unarchives != 1 {
		t.Fatalf("counters archives %d unarchives %d", c.Archives, c.Unarchives)
	}

	// The next expiry archives again; the sandbox token's relay wakes it
	// transparently, with the fresh lease too.
	clock.Step(60 * time.Second)
	n.ReapExpired()
	if row, _ = root.Sandbox(ctx, cl.ID); !row.Archived {
		t.Fatalf("second expiry did not archive: %+v", row)
	}
	doc := echoRoundTrip(t, transportOver(own, cl.ID, echoPort, false))
	if doc.Sandbox != cl.ID {
		t.Fatalf("woken guest answered as %q", doc.Sandbox)
	}
	row, _ = root.Sandbox(ctx, cl.ID)
	if row.Archived || !row.Deadline.Equal(clock.Now().Add(60*time.Second)) {
		t.Fatalf("relay-woken row %+v", row)
	}
}

// A renew switches the expiry action (absent keeps it) and its grant is
// the lease a wake from the archive grants again; the retention knob
// deletes an archive when it ends.
func TestRenewSwitchesOnExpireAndRetentionDeletes(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	cfg.ReapInterval = time.Hour
	cfg.ArchiveDeleteAfter = 10 * time.Minute
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 30})
	own := root.As(cl.Token)

	_, err := own.RenewWith(ctx, cl.ID, sandboxd.RenewRequest{TTLSeconds: 90, OnExpire: "later"})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	if _, err := own.RenewWith(ctx, cl.ID, sandboxd.RenewRequest{TTLSeconds: 90, OnExpire: sandboxd.ExpireArchive}); err != nil {
		t.Fatal(err)
	}
	if _, err := own.Renew(ctx, cl.ID, 120); err != nil { // absent keeps archive
		t.Fatal(err)
	}
	clock.Step(121 * time.Second)
	n.ReapExpired()
	row, _ := root.Sandbox(ctx, cl.ID)
	if !row.Archived || !row.Deadline.Equal(clock.Now().Add(10*time.Minute)) {
		t.Fatalf("archived row %+v: its deadline is the retention window", row)
	}
	if err := root.Wake(ctx, cl.ID); err != nil {
		t.Fatal(err)
	}
	if row, _ = root.Sandbox(ctx, cl.ID); !row.Deadline.Equal(clock.Now().Add(120 * time.Second)) {
		t.Fatalf("wake granted %s, want the last renew's 120s", row.Deadline.Sub(clock.Now()))
	}
	clock.Step(120 * time.Second)
	n.ReapExpired()
	clock.Step(10*time.Minute - time.Second)
	if got := n.ReapExpired(); got != 0 {
		t.Fatalf("deleted %d before the retention ended", got)
	}
	clock.Step(time.Second)
	if got := n.ReapExpired(); got != 1 {
		t.Fatalf("deleted %d at the end of the retention, want 1", got)
	}
	_, err = root.Sandbox(ctx, cl.ID)
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	if c := n.Counters(); c.ArchiveDeletes != 1 {
		t.Fatalf("archive deletes = %d", c.ArchiveDeletes)
	}

	// Switching back to destroy destroys at the deadline.
	cl2, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 30, OnExpire: sandboxd.ExpireArchive})
	if _, err := root.RenewWith(ctx, cl2.ID, sandboxd.RenewRequest{OnExpire: sandboxd.ExpireDestroy}); err != nil {
		t.Fatal(err)
	}
	clock.Step(sandboxd.DefaultTTL)
	if got := n.ReapExpired(); got != 1 {
		t.Fatalf("reaped %d after switching to destroy", got)
	}
}

func TestOnExpireRefusals(t *testing.T) {
	cfg := testConfig()
	cfg.EgressAttachment = true
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	_, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, OnExpire: "keep"})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	// The egress lane cannot hibernate, so it cannot archive: hibernate's 409.
	_, err = root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Net: "egress", OnExpire: sandboxd.ExpireArchive})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	eg, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, Net: "egress"})
	if err != nil {
		t.Fatal(err)
	}
	if eg.NetRoute != "direct" {
		t.Fatalf("egress-lane claim answered net_route %q, want direct (the simulator never locks the NIC)", eg.NetRoute)
	}
	hibErr := root.Hibernate(ctx, eg.ID)
	_, err = root.RenewWith(ctx, eg.ID, sandboxd.RenewRequest{OnExpire: sandboxd.ExpireArchive})
	wantStatus(t, err, http.StatusConflict, sandboxd.ErrConflict)
	if sandboxd.StatusOf(hibErr) != http.StatusConflict || !strings.Contains(err.Error(), strings.TrimPrefix(hibErr.Error(), "sandboxd: POST /v1/sandboxes/{id}/hibernate: 409: ")) {
		t.Fatalf("archive refusal %v differs from hibernate's %v", err, hibErr)
	}
}

// Fork children inherit on_expire and "egress": false; the body overrides
// the action.
func TestForkInheritsOnExpireAndEgress(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	no := false
	parent, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, OnExpire: sandboxd.ExpireArchive, Egress: &no})
	if err != nil {
		t.Fatal(err)
	}
	if parent.NetRoute != "none" {
		t.Fatalf("egress false answered net_route %q", parent.NetRoute)
	}
	kids, err := root.Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: parent.Token, Count: 2})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range kids {
		row, _ := root.Sandbox(ctx, k.ID)
		if row.OnExpire != sandboxd.ExpireArchive {
			t.Fatalf("child %+v row %+v did not inherit", k, row)
		}
	}
	kids, err = root.Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: parent.Token, Count: 1, OnExpire: sandboxd.ExpireDestroy})
	if err != nil {
		t.Fatal(err)
	}
	if row, _ := root.Sandbox(ctx, kids[0].ID); row.OnExpire != sandboxd.ExpireDestroy {
		t.Fatalf("body on_expire did not override: %+v", row)
	}
	_, err = root.Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: parent.Token, Count: 1, OnExpire: "nope"})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)

	// A checkpoint branch takes this request's on_expire and env.
	ck, err := root.Checkpoint(ctx, parent.ID, sandboxd.CheckpointRequest{Token: parent.Token})
	if err != nil {
		t.Fatal(err)
	}
	br, err := root.ClaimCheckpoint(ctx, ck.ID, sandboxd.CheckpointClaimRequest{
		OnExpire: sandboxd.ExpireDestroy, Env: map[string]sandboxd.EnvEntry{"MODE": {Value: "branch"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	row, _ := root.Sandbox(ctx, br.ID)
	env, _ := root.Env(ctx, br.ID)
	if row.OnExpire != sandboxd.ExpireDestroy || env["MODE"].Value != "branch" {
		t.Fatalf("branch row %+v env %+v", row, env)
	}
	_, err = root.ClaimCheckpoint(ctx, ck.ID, sandboxd.CheckpointClaimRequest{OnExpire: "x"})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
}
