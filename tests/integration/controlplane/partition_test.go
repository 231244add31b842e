package controlplane_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/tests/testbin"
)

// cutCreates is how many creates start, and finish, after the server
// found the cut node silent and before the path heals: the creates after
// the first ones that found the node silent show whether they still wait
// on it (each such wait would be a node timeout). A soak run
// (testbin.SoakScale) makes it that many times more.
const cutCreates = 20

// TestNodeCutOffFromTheServer cuts the network path from sandbox-apiserver
// to one of the three nodes under the steady create/delete/list load, and
// heals it. The node keeps running and publishing its NodeInventory over
// its own path, so the server keeps seeing it fresh, with warm VMs, for
// the whole cut: only the calls the server makes to it go unanswered.
//
// Lists never fail (the informer serves them). A create that draws the
// silent node waits one node timeout and is placed elsewhere; the fleet
// core then tries that node after every other candidate until it answers
// again, so only the creates in flight when it fell silent (at most one
// per creator) may wait. Deletes of sandboxes on the node fail while it
// is cut, inside the window. After healing the node takes claims again,
// and what the load created is what the fleet holds.
func TestNodeCutOffFromTheServer(t *testing.T) {
	e := sharedEnv(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*waitTimeout)
	defer cancel()
	api := e.api(ctx, t, "cp-cut")
	e.waitAnswering(ctx, t, api, "cut-warmup")
	baseline, err := e.serverGoroutines(ctx)
	if err != nil {
		t.Fatalf("read the server's goroutines before the load: %v", err)
	}

	load := startLoad(api, "cut")
	t.Cleanup(func() { load.stop() })
	load.waitWarm(t, warmRequests*testbin.SoakScale())

	f := fault{
		part: "the path to one node", what: "the network path from the server to one of three nodes cut, the node still publishing",
		// A call held by the cut, answered or timed out after it heals.
		bound: serverNodeTimeout, start: time.Now(),
	}
	e.link.Cut()
	// The cut is met once a create drew the node and the server gave up
	// on it after a node timeout, which it logs; then the creates that
	// follow show whether they still wait on it.
	var silentAt time.Time
	poll.UntilNil(t, "a create to find the cut node silent", func() error {
		drew, err := e.claimsFailedOn(e.fleet.Node(linkedNode).Name(), api.namespace)
		if err != nil {
			return err
		}
		if len(drew) == 0 {
			return errors.New("no claim has failed on it yet")
		}
		silentAt = time.Now()
		return nil
	})
	n := cutCreates * testbin.SoakScale()
	load.waitFor(t, fmt.Sprintf("%d creates during the cut after one found the node silent", n), func(out []outcome) error {
		after := 0
		for _, o := range out {
			if o.kind == kindCreate && o.start.After(silentAt) {
				after++
			}
		}
		if after < n {
			return fmt.Errorf("%d so far", after)
		}
		return nil
	})
	e.link.Heal()
	f.ready = time.Now()
	load.waitPast(t, f.windowEnd(), pastWindowRequests*testbin.SoakScale())
	outcomes := load.stop()

	figs := f.checkLoad(t, outcomes)
	if n := figs[kindList].failed[before] + figs[kindList].failed[during] + figs[kindList].failed[after]; n > 0 {
		t.Errorf("%d lists failed; the informer serves them whatever a node does", n)
	}
	var createsDuring, waited []string
	for _, o := range outcomes {
		if o.kind != kindCreate || !o.ok() || o.end.Before(f.start) || !o.start.Before(f.ready) {
			continue
		}
		createsDuring = append(createsDuring, o.name)
		if d := o.end.Sub(o.start); d >= serverNodeTimeout {
			waited = append(waited, fmt.Sprintf("%s (%v, started %+v into the cut)", o.name, d.Round(time.Millisecond), o.start.Sub(f.start).Round(time.Millisecond)))
		}
	}
	// The server logs every claim that found a node silent, with its
	// claim reference: the creates that drew the cut node.
	drew, err := e.claimsFailedOn(e.fleet.Node(linkedNode).Name(), api.namespace)
	if err != nil {
		t.Fatal(err)
	}
	if len(drew) == 0 {
		t.Errorf("no create drew the cut node: the fault did not happen as meant")
	}
	if len(drew) > creators {
		t.Errorf("%d creates tried the cut node, want at most %d (those in flight when it fell silent): %v; %d of %d creates during the cut waited a node timeout: %s",
			len(drew), creators, drew, len(waited), len(createsDuring), strings.Join(waited, ", "))
	}
	for _, k := range kinds {
		f.logOutage(t, outcomes, k)
	}

	e.checkState(ctx, t, api, f, outcomes)
	// The re-check of the first claim that found the node silent hears it
	// again once the path heals, and the node takes creates again.
	heard, err := e.heardAgain(e.link.Addr(), f.ready)
	if err != nil {
		t.Error(err)
	}
	tries := e.placeOnLinked(ctx, t, api)
	t.Logf("FAULT node-cut-off: cut=%v creates-during=%d tried-the-cut-node=%d waited-a-node-timeout=%d %v; heard again %v after healing; %d creates to place one on it again",
		f.ready.Sub(f.start).Round(time.Millisecond), len(createsDuring), len(drew), len(waited), waited, heard.Round(time.Millisecond), tries)
	if err := e.drain(ctx, api); err != nil {
		t.Fatal(err)
	}
	e.checkNothingClaimed(t)
	e.checkGoroutinesSettle(ctx, t, baseline)
}

// placeOnLinked creates sandboxes until one lands on the linked node and
// returns how many that took: the server must place on the node again
// once it answers. Each poll creates one.
func (e *testEnv) placeOnLinked(ctx context.Context, t *testing.T, api sandboxAPI) int {
	t.Helper()
	node := e.fleet.Node(linkedNode)
	i := 0
	poll.UntilNil(t, "a create after healing to land on the node that was cut off", func() error {
		if err := ctx.Err(); err != nil {
			t.Fatal(err)
		}
		i++
		name := fmt.Sprintf("cut-again-%03d", i)
		if o := api.create(name); !o.ok() {
			t.Fatalf("create %s after healing: %s", name, o.err)
		}
		for _, en := range node.Snapshot().Entries {
			if en.ClaimRef == api.namespace+"/"+name {
				return nil
			}
		}
		return fmt.Errorf("%d creates, none on it", i)
	})
	return i
}

// heardAgain finds in the server's log when the fleet core heard again
// from the node at addr after it was silent, and returns that time after
// since.
func (e *testEnv) heardAgain(addr string, since time.Time) (time.Duration, error) {
	raw, err := os.ReadFile(e.server.LogPath())
	if err != nil {
		return 0, fmt.Errorf("read the server's log: %w", err)
	}
	for line := range strings.Lines(string(raw)) {
		if !strings.Contains(line, `msg="A node that did not answer answers again"`) || !strings.Contains(line, " node="+addr) {
			continue
		}
		stamp, ok := strings.CutPrefix(strings.Fields(line)[0], "time=")
		if !ok {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, stamp)
		if err == nil && !at.Before(since) {
			return at.Sub(since), nil
		}
	}
	return 0, fmt.Errorf("the server never logged hearing from %s again after the path healed", addr)
}

// claimsFailedOn reads the server's log for the claims in namespace that
// failed on the node named node, and returns their claim references.
func (e *testEnv) claimsFailedOn(node, namespace string) ([]string, error) {
	raw, err := os.ReadFile(e.server.LogPath())
	if err != nil {
		return nil, fmt.Errorf("read the server's log: %w", err)
	}
	var refs []string
	for line := range strings.Lines(string(raw)) {
		if !strings.Contains(line, `msg="Claim failed on a node, trying the next"`) || !strings.Contains(line, " node="+node+" ") {
			continue
		}
		for field := range strings.FieldsSeq(line) {
			if ref, ok := strings.CutPrefix(field, "claimRef="); ok && strings.HasPrefix(ref, namespace+"/") {
				refs = append(refs, ref)
			}
		}
	}
	return refs, nil
}
