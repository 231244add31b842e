// Package fleettest is the conformance table every fleet view must pass:
// the fleet core over the view, against simulated sandboxd nodes, shows
// the same behaviour whichever front the view serves. src/apiserver/backend runs
// it over the NodeInventory view and src/mesh over the gossip view.
package fleettest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Spec is the fleet a case needs: Nodes nodes, each keeping Warm warm VMs
// of the harness's key, and the fleet's node-choice randomness.
type Spec struct {
	Nodes, Warm int
	Rand        *rand.Rand
}

// Harness is one fleet under test.
type Harness struct {
	Fleet *fleet.Fleet
	// Key is the pool key every node keeps warm.
	Key sandbox.PoolKey
	// Owners counts the live claims each node holds, by node address.
	Owners func() map[string]int
}

// NewFunc starts a fleet to spec; it registers its own cleanup.
type NewFunc func(t *testing.T, spec Spec) Harness

// Run runs every case against fleets made by newFleet.
func Run(t *testing.T, newFleet NewFunc) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, NewFunc)
	}{
		{"ClaimFindListRelease", claimFindListRelease},
		{"PauseResumeRenew", pauseResumeRenew},
		{"Fork", fork},
		{"Checkpoint", checkpoint},
		{"ClaimCheckpoint", claimCheckpoint},
		{"PromotedClaims", promotedClaims},
		{"InvalidRequests", invalidRequests},
		{"SpreadsConcurrentClaims", spreadsConcurrentClaims},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, newFleet) })
	}
}

func ref(ns, name string) sandbox.ClaimRef { return sandbox.ClaimRef{Namespace: ns, Name: name} }

func claim(t *testing.T, h Harness, r sandbox.ClaimRef, ttl int) fleet.Claimed {
	t.Helper()
	c, err := h.Fleet.Claim(context.Background(), fleet.ClaimRequest{Ref: r, Key: h.Key, TTLSeconds: ttl})
	if err != nil {
		t.Fatalf("claim %s: %v", r, err)
	}
	return c
}

func claimFindListRelease(t *testing.T, newFleet NewFunc) {
	h := newFleet(t, Spec{Nodes: 2, Warm: 2})
	ctx := context.Background()
	c := claim(t, h, ref("team-a", "web"), 600)
	if !sandbox.ValidID(c.ID) || !strings.HasPrefix(c.ID, sandbox.IDPrefix) || c.Token == "" || c.NodeAddr == "" {
		t.Fatalf("claimed %+v (token set: %v)", c.Sandbox, c.Token != "")
	}
	if c.ClaimRef != ref("team-a", "web") {
		t.Errorf("claim ref = %v", c.ClaimRef)
	}
	if d := time.Until(c.Deadline); d < 9*time.Minute || d > 11*time.Minute {
		t.Errorf("deadline %v away, want about the 600 s asked", d)
	}
	dns, _ := sandbox.DNSID(c.ID)
	for _, id := range []string{c.ID, dns} {
		got, err := h.Fleet.Find(ctx, "team-a", id)
		if err != nil || got.ID != c.ID || got.Name != "web" || got.NodeAddr != c.NodeAddr {
			t.Errorf("Find(%s) = %+v, %v", id, got, err)
		}
	}
	for _, tc := range []struct{ ns, id string }{{"team-b", c.ID}, {"team-a", "sb_doesnotexist"}, {"team-a", "not-an-id"}} {
		if _, err := h.Fleet.Find(ctx, tc.ns, tc.id); !errors.Is(err, fleet.ErrNotFound) {
			t.Errorf("Find(%s, %s) = %v, want ErrNotFound", tc.ns, tc.id, err)
		}
	}
	if ids := listIDs(t, h, "team-a"); !ids[c.ID] {
		t.Errorf("List(team-a) misses the claim: %v", ids)
	}
	if ids := listIDs(t, h, "team-b"); ids[c.ID] {
		t.Error("List(team-b) shows team-a's sandbox")
	}
	if err := h.Fleet.Release(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}
	if _, err := h.Fleet.Find(ctx, "team-a", c.ID); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("Find after Release = %v, want ErrNotFound", err)
	}
	if err := h.Fleet.Release(ctx, c.Sandbox); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("second Release = %v, want ErrNotFound", err)
	}
	if err := h.Fleet.Pause(ctx, c.Sandbox); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("Pause after Release = %v, want ErrNotFound", err)
	}
}

func listIDs(t *testing.T, h Harness, ns string) map[string]bool {
	t.Helper()
	sbs, err := h.Fleet.List(context.Background(), ns)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, sb := range sbs {
		if ns != "" && sb.Namespace != ns {
			t.Errorf("List(%s) returned a sandbox of %s", ns, sb.Namespace)
		}
		out[sb.ID] = true
	}
	return out
}

func pauseResumeRenew(t *testing.T, newFleet NewFunc) {
	h := newFleet(t, Spec{Nodes: 1, Warm: 1})
	ctx := context.Background()
	c := claim(t, h, ref("ns", "life"), 60)
	if err := h.Fleet.Pause(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}
	paused, err := h.Fleet.Find(ctx, "ns", c.ID)
	if err != nil || !paused.Paused {
		t.Fatalf("after Pause: %+v, %v", paused, err)
	}
	// A paused sandbox's lease is renewed to keep it (e2b's auto-pause);
	// the renew must leave it paused.
	if _, err := h.Fleet.Renew(ctx, paused, 120); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Fleet.Find(ctx, "ns", c.ID); err != nil || !got.Paused {
		t.Fatalf("after renewing the paused sandbox: %+v, %v", got, err)
	}
	if err := h.Fleet.Resume(ctx, c.Sandbox); err != nil {
		t.Fatal(err)
	}
	if got, err := h.Fleet.Find(ctx, "ns", c.ID); err != nil || got.Paused {
		t.Fatalf("after Resume: %+v, %v", got, err)
	}
	deadline, err := h.Fleet.Renew(ctx, c.Sandbox, 3600)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(deadline); d < 50*time.Minute {
		t.Errorf("renewed deadline only %v away", d)
	}
	if got, err := h.Fleet.Find(ctx, "ns", c.ID); err != nil || got.Deadline.Before(deadline.Add(-time.Second)) {
		t.Errorf("after Renew Find shows deadline %v, want %v: %v", got.Deadline, deadline, err)
	}
}

func fork(t *testing.T, newFleet NewFunc) {
	h := newFleet(t, Spec{Nodes: 1, Warm: 1})
	ctx := context.Background()
	parent := claim(t, h, ref("ns", "web"), 600)
	children, err := h.Fleet.Fork(ctx, parent.Sandbox, 2, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(children) != 2 {
		t.Fatalf("forked %d children, want 2", len(children))
	}
	for _, c := range children {
		dns, _ := sandbox.DNSID(c.ID)
		if c.Namespace != "ns" || c.Name != "web-fork-"+dns || c.Token == "" || c.NodeAddr != parent.NodeAddr {
			t.Errorf("child %+v (token set: %v)", c.Sandbox, c.Token != "")
		}
		got, err := h.Fleet.Find(ctx, "ns", c.ID)
		if err != nil || got.Name != c.Name {
			t.Errorf("Find(child) = %+v, %v; want the name %s", got, err, c.Name)
		}
	}
	for _, n := range []int{0, sandbox.MaxForkCount + 1} {
		if _, err := h.Fleet.Fork(ctx, parent.Sandbox, n, 0); !errors.Is(err, fleet.ErrInvalid) {
			t.Errorf("Fork(count %d) = %v, want ErrInvalid", n, err)
		}
	}
}

func checkpoint(t *testing.T, newFleet NewFunc) {
	h := newFleet(t, Spec{Nodes: 1, Warm: 1})
	c := claim(t, h, ref("ns", "ck"), 600)
	ck, err := h.Fleet.Checkpoint(context.Background(), c.Sandbox, "before-upgrade")
	if err != nil {
		t.Fatal(err)
	}
	if ck.ID == "" || ck.Name != "before-upgrade" {
		t.Errorf("checkpoint = %+v", ck)
	}
}

// claimCheckpoint branches a sandbox from a checkpoint under the caller's
// claim reference, with the checkpoint's key, found at once in its
// namespace; an unknown checkpoint is ErrNotFound and claims nothing.
func claimCheckpoint(t *testing.T, newFleet NewFunc) {
	h := newFleet(t, Spec{Nodes: 1, Warm: 2})
	ctx := context.Background()
	c := claim(t, h, ref("ns", "src"), 600)
	ck, err := h.Fleet.Checkpoint(ctx, c.Sandbox, "")
	if err != nil {
		t.Fatal(err)
	}
	br, err := h.Fleet.ClaimCheckpoint(ctx, fleet.CheckpointClaimRequest{Ref: ref("ns", "branch"), Checkpoint: ck.ID, NodeAddr: c.NodeAddr, TTLSeconds: 60})
	if err != nil {
		t.Fatalf("ClaimCheckpoint: %v", err)
	}
	if br.Token == "" || br.ClaimRef != ref("ns", "branch") || br.Key.WithDefaults() != h.Key.WithDefaults() || br.NodeAddr != c.NodeAddr {
		t.Errorf("branch = %+v, want the checkpoint's key on its node under ns/branch", br.Sandbox)
	}
	if found, err := h.Fleet.Find(ctx, "ns", br.ID); err != nil || found.Name != "branch" {
		t.Errorf("Find(branch) = %+v, %v", found, err)
	}
	if _, err := h.Fleet.Find(ctx, "other", br.ID); !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("Find(branch) in another namespace = %v, want ErrNotFound", err)
	}
	before := total(h.Owners())
	_, err = h.Fleet.ClaimCheckpoint(ctx, fleet.CheckpointClaimRequest{Ref: ref("ns", "none"), Checkpoint: "ck_unknown", NodeAddr: c.NodeAddr})
	if !errors.Is(err, fleet.ErrNotFound) {
		t.Errorf("ClaimCheckpoint(unknown) = %v, want ErrNotFound", err)
	}
	if after := total(h.Owners()); after != before {
		t.Errorf("a refused checkpoint claim changed the live claims from %d to %d", before, after)
	}
}

// promotedClaims claims a template a node published with promote at its
// holder, and a template no node holds (any more) is ErrNoTemplate.
func promotedClaims(t *testing.T, newFleet NewFunc) {
	h := newFleet(t, Spec{Nodes: 2, Warm: 2})
	ctx := context.Background()
	src := claim(t, h, ref("ns", "src"), 600)
	node, err := h.Fleet.Client(src.NodeAddr)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := node.Promote(ctx, src.ID, sandboxd.PromoteRequest{Token: src.Token, Template: "conformance/published"})
	if err != nil {
		t.Fatalf("promote: %v", err)
	}
	req := fleet.ClaimRequest{Ref: ref("ns", "clone"), Key: pub.Key, Promoted: true, At: []string{src.NodeAddr}}
	cl, err := h.Fleet.Claim(ctx, req)
	if err != nil {
		t.Fatalf("Claim(promoted): %v", err)
	}
	if cl.NodeAddr != src.NodeAddr || cl.Key.Template != "conformance/published" {
		t.Errorf("clone = %+v, want the template on its holder", cl.Sandbox)
	}
	req.At, req.Ref = nil, ref("ns", "nowhere")
	if _, err := h.Fleet.Claim(ctx, req); !errors.Is(err, fleet.ErrNoTemplate) {
		t.Errorf("Claim(promoted, no holder) = %v, want ErrNoTemplate", err)
	}
	if err := node.DeleteTemplate(ctx, pub.Key, pub.ContentDigest); err != nil {
		t.Fatal(err)
	}
	before := total(h.Owners())
	req.At, req.Ref = []string{src.NodeAddr}, ref("ns", "gone")
	if _, err := h.Fleet.Claim(ctx, req); !errors.Is(err, fleet.ErrNoTemplate) {
		t.Errorf("Claim(promoted) after the delete = %v, want ErrNoTemplate", err)
	}
	// No warm VM of the pool and no cold boot stood in for the template.
	if after := total(h.Owners()); after != before {
		t.Errorf("a claim of a deleted template claimed something: %d live, was %d", after, before)
	}
}

func invalidRequests(t *testing.T, newFleet NewFunc) {
	h := newFleet(t, Spec{Nodes: 1, Warm: 1})
	ctx := context.Background()
	for _, r := range []sandbox.ClaimRef{ref("", "x"), ref("a/b", "x"), ref("a", ""), ref("a", "Upper"), ref("a", "x_y")} {
		if _, err := h.Fleet.Claim(ctx, fleet.ClaimRequest{Ref: r, Key: h.Key}); !errors.Is(err, fleet.ErrInvalid) {
			t.Errorf("Claim(%q) = %v, want ErrInvalid", r, err)
		}
	}
	bad := h.Key
	bad.Size = "enormous"
	if _, err := h.Fleet.Claim(ctx, fleet.ClaimRequest{Ref: ref("a", "x"), Key: bad}); err == nil {
		t.Error("a claim of an unknown size succeeded")
	}
	if owners := h.Owners(); total(owners) != 0 {
		t.Errorf("refused claims left sandboxes behind: %v", owners)
	}
}

// spreadsConcurrentClaims is the node-choice policy's promise: 100
// concurrent creates over 4 equally warm nodes spread out instead of
// herding onto one node while the view is still the one they started from.
func spreadsConcurrentClaims(t *testing.T, newFleet NewFunc) {
	const nodes, claims = 4, 100
	h := newFleet(t, Spec{Nodes: nodes, Warm: 50, Rand: rand.New(rand.NewPCG(1, 2))})
	var wg sync.WaitGroup
	errs := make(chan error, claims)
	for i := range claims {
		wg.Go(func() {
			_, err := h.Fleet.Claim(context.Background(), fleet.ClaimRequest{Ref: ref("spread", fmt.Sprintf("c%d", i)), Key: h.Key})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	owners := h.Owners()
	if len(owners) != nodes || total(owners) != claims {
		t.Fatalf("claims per node = %v, want %d claims over %d nodes", owners, claims, nodes)
	}
	t.Logf("claims per node: %v", owners)
	for addr, n := range owners {
		// An even spread is 25 each; warmest-first would put nearly all
		// 100 on one node. 40 is five standard deviations of a fair draw.
		if n > 40 {
			t.Errorf("node %s took %d of %d claims: %v", addr, n, claims, owners)
		}
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// CountOwners counts claims per owner address on nodes listed with a root
// client; harnesses use it for Owners.
func CountOwners(ctx context.Context, addrs []string, token string) (map[string]int, error) {
	out := map[string]int{}
	for _, a := range addrs {
		c, err := sandboxd.New(a, sandboxd.WithToken(token))
		if err != nil {
			return nil, err
		}
		rows, err := c.Sandboxes(ctx, "")
		if err != nil {
			return nil, err
		}
		if len(rows) > 0 {
			out[a] = len(rows)
		}
	}
	return out, nil
}
