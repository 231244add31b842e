package node_test

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func TestForkBoundsAndChildren(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	cfg.MaxForkCount = 4
	n := startNode(t, cfg)
	ctx := ctxT(t)
	a := client(t, n, tenantA)
	parent, err := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl, TTLSeconds: 30})
	if err != nil {
		t.Fatal(err)
	}
	// The parent's disk state must reach the children.
	if _, err := n.GuestAddr(parent.ID, echoPort); err != nil {
		t.Fatal(err)
	}
	dir, _ := n.ScratchDir(parent.ID)
	if err := os.WriteFile(filepath.Join(dir, "state.txt"), []byte("forked"), 0o600); err != nil {
		t.Fatal(err)
	}

	for _, count := range []int{0, -1, 5} {
		_, err := a.Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: parent.Token, Count: count})
		wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	}
	_, err = client(t, n, "").Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: parent.Token, Count: 1})
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)
	_, err = a.Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: "wrong", Count: 1})
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	_, err = a.Fork(ctx, parent.ID, sandboxd.ForkRequest{Count: 1}) // only root acts by id
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	_, err = a.Fork(ctx, "sb_nope", sandboxd.ForkRequest{Token: parent.Token, Count: 1})
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)

	// team-a may hold 3 claims: the parent plus two children fit, three don't.
	_, err = a.Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: parent.Token, Count: 3})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)

	// Root forks by id, but the children still count against team-a.
	kids, err := client(t, n, rootToken).Fork(ctx, parent.ID, sandboxd.ForkRequest{Count: 2, TTLSeconds: 600, ClaimRefPrefix: "team-a/"})
	if err != nil {
		t.Fatalf("fork: %v", err)
	}
	if len(kids) != 2 {
		t.Fatalf("want 2 children, got %d", len(kids))
	}
	seen := map[string]bool{parent.ID: true, parent.Token: true}
	for _, k := range kids {
		if seen[k.ID] || seen[k.Token] || !strings.HasPrefix(k.ID, "sb_") {
			t.Fatalf("children need fresh ids and tokens: %+v", kids)
		}
		seen[k.ID], seen[k.Token] = true, true
		if !k.Deadline.Equal(clock.Now().Add(600*time.Second)) || k.OwnerAddr != n.Addr() {
			t.Fatalf("child lease is its own ttl, not the parent's remainder: %+v", k)
		}
		rows, err := a.Sandboxes(ctx, "team-a/"+k.ID)
		if err != nil || len(rows) != 1 || rows[0].ID != k.ID {
			t.Fatalf("child must be the tenant's, under prefix+id: %+v %v", rows, err)
		}
		kdir, _ := n.ScratchDir(k.ID)
		if b, err := os.ReadFile(filepath.Join(kdir, "state.txt")); err != nil || string(b) != "forked" {
			t.Fatalf("child disk state: %q %v", b, err)
		}
	}
	_, err = a.Fork(ctx, parent.ID, sandboxd.ForkRequest{Token: parent.Token, Count: 1})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)

	// Without a prefix children carry no claim_ref; a hibernated parent
	// forks without waking.
	if err := client(t, n, rootToken).Hibernate(ctx, kids[0].ID); err != nil {
		t.Fatal(err)
	}
	b := client(t, n, tenantB)
	bp, _ := b.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err := b.As(bp.Token).Hibernate(ctx, bp.ID); err != nil {
		t.Fatal(err)
	}
	bk, err := b.Fork(ctx, bp.ID, sandboxd.ForkRequest{Token: bp.Token, Count: 1})
	if err != nil {
		t.Fatal(err)
	}
	row, _ := client(t, n, rootToken).Sandbox(ctx, bk[0].ID)
	prow, _ := client(t, n, rootToken).Sandbox(ctx, bp.ID)
	if row.ClaimRef != "" || !prow.Hibernated {
		t.Fatalf("child row %+v, parent row %+v", row, prow)
	}
}

func TestForkDrainingNode(t *testing.T) {
	n := startNode(t, testConfig())
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	p, _ := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if _, err := root.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	_, err := root.Fork(ctx, p.ID, sandboxd.ForkRequest{Token: p.Token, Count: 1})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)
}

func TestCheckpointsOrderScopeAndClaim(t *testing.T) {
	clock := newFakeClock()
	cfg := testConfig()
	cfg.Clock = clock
	n := startNode(t, cfg)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	a := client(t, n, tenantA)
	b := client(t, n, tenantB)
	sb, _ := a.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if _, err := n.GuestAddr(sb.ID, echoPort); err != nil {
		t.Fatal(err)
	}
	dir, _ := n.ScratchDir(sb.ID)
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("v1"), 0o600); err != nil {
		t.Fatal(err)
	}

	first, err := a.Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{Token: sb.Token, Name: "first"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.ID, "ck_") || first.SandboxID != sb.ID || first.Key != baseKey || first.Tenant != "team-a" || first.Name != "first" {
		t.Fatalf("checkpoint record = %+v", first)
	}
	// Same clock tick: creation order still decides.
	second, _ := a.Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{Token: sb.Token, Name: "second"})
	clock.Step(time.Second)
	byRoot, err := root.Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{}) // operator by id
	if err != nil {
		t.Fatal(err)
	}
	if byRoot.Tenant != "" {
		t.Fatalf("root checkpoint must not carry a tenant: %+v", byRoot)
	}

	list, err := root.Checkpoints(ctx)
	if err != nil || len(list) != 3 || list[0].ID != byRoot.ID || list[1].ID != second.ID || list[2].ID != first.ID {
		t.Fatalf("root list must be newest first: %+v %v", list, err)
	}
	mine, _ := a.Checkpoints(ctx)
	if len(mine) != 2 || mine[0].ID != second.ID {
		t.Fatalf("tenant sees only its own: %+v", mine)
	}
	if theirs, _ := b.Checkpoints(ctx); len(theirs) != 0 {
		t.Fatalf("team-b sees %+v", theirs)
	}

	// Errors: bad name, wrong token, unknown sandbox, tenant empty token.
	_, err = a.Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{Token: sb.Token, Name: "has space"})
	wantStatus(t, err, http.StatusBadRequest, sandboxd.ErrBadRequest)
	_, err = a.Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{Token: "wrong"})
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	_, err = a.Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{})
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)
	_, err = client(t, n, unknownTok).Checkpoint(ctx, sb.ID, sandboxd.CheckpointRequest{Token: sb.Token})
	wantStatus(t, err, http.StatusUnauthorized, sandboxd.ErrUnauthorized)

	// The disk changes after the checkpoint; a branch sees the old state.
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("v2"), 0o600); err != nil {
		t.Fatal(err)
	}
	branch, err := b.ClaimCheckpoint(ctx, first.ID, sandboxd.CheckpointClaimRequest{TTLSeconds: 60, ClaimRef: "team-b/branch"})
	if err != nil {
		t.Fatalf("claim checkpoint: %v", err)
	}
	if branch.FromCheckpoint != first.ID || branch.ID == sb.ID || !branch.Deadline.Equal(clock.Now().Add(time.Minute)) {
		t.Fatalf("branch = %+v", branch)
	}
	bdir, _ := n.ScratchDir(branch.ID)
	if got, err := os.ReadFile(filepath.Join(bdir, "f")); err != nil || string(got) != "v1" {
		t.Fatalf("branch disk = %q %v, want v1", got, err)
	}
	rows, _ := b.Sandboxes(ctx, "")
	if len(rows) != 1 || rows[0].FromCheckpoint != first.ID || rows[0].ClaimRef != "team-b/branch" {
		t.Fatalf("branch attributed to the caller with its lineage and claim reference: %+v", rows)
	}
	_, err = b.ClaimCheckpoint(ctx, "ck_unknown", sandboxd.CheckpointClaimRequest{})
	wantStatus(t, err, http.StatusNotFound, sandboxd.ErrNotFound)

	// Delete: a tenant only its own, never a hint; root anything.
	wantStatus(t, b.DeleteCheckpoint(ctx, first.ID), http.StatusNotFound, sandboxd.ErrNotFound)
	if err := a.DeleteCheckpoint(ctx, first.ID); err != nil {
		t.Fatal(err)
	}
	wantStatus(t, a.DeleteCheckpoint(ctx, first.ID), http.StatusNotFound, sandboxd.ErrNotFound)
	if err := root.DeleteCheckpoint(ctx, second.ID); err != nil {
		t.Fatal(err)
	}
	if list, _ := root.Checkpoints(ctx); len(list) != 1 || list[0].ID != byRoot.ID {
		t.Fatalf("after deletes: %+v", list)
	}

	// Branching is a claim: draining refuses it.
	if _, err := root.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = b.ClaimCheckpoint(ctx, byRoot.ID, sandboxd.CheckpointClaimRequest{})
	wantStatus(t, err, http.StatusTooManyRequests, sandboxd.ErrCapacity)
}
