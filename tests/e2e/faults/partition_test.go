package faults_test

import (
	"bytes"
	"context"
	"net/http"
	"slices"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// TestPartitionedNode cuts the network path to one node under create and
// list load until the create it caught has moved on and creates keep
// succeeding past the node timeout, then heals it. Nothing reaches the
// node meanwhile, neither the front nor its peers, but unlike a hung node
// it keeps running and keeps reaching out (the cut is one-way, as a
// broken route or a firewall rule makes it): what reached it before the
// cut it carries out, and the answers wait behind the cut. While cut,
// creates and lists keep answering from the other nodes; once healed, its
// sandboxes answer again, the front places new sandboxes on it, and
// nothing nobody was told about stays claimed (a claim it granted behind
// the cut, for a create the front had moved elsewhere, is released).
func TestPartitionedNode(t *testing.T) {
	s := startLinkedStack(t)
	held := s.usage(t)
	victim := s.direct[linked]
	pre, onVictim := s.createUntilOn(t, victim, 2)

	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	began := time.Now()
	load := s.createLoad(ctx, createWorkers)
	listed := s.listLoad(t, ctx)
	load.waitSucceeded(t, createWorkers, began, "the load began")
	// The partition begins as a claim reaches the node: the node grants
	// it, and the answer is behind the cut.
	select {
	case <-s.link.CutAfter(isClaim):
	case <-time.After(poll.Timeout):
		t.Fatalf("no claim reached the linked node in %v", poll.Timeout)
	}
	cut := time.Now()
	// The cut holds until the create whose claim it caught has ended
	// (placed elsewhere once the node timeout passed), and creates started
	// after that timeout succeed on the other nodes.
	load.waitEnded(t, cut, "the cut")
	load.waitSucceeded(t, 2*createWorkers, cut.Add(nodeTimeout), "the node timeout after the cut")
	peersCut := s.peersNaming(t, s.direct[0], s.nodes[linked].Addrs()[0])
	// What the node holds, seen from its console: the test's own address
	// for it is not behind the link.
	behindCut := s.owners(t, []string{victim})
	s.link.Heal()
	healed := time.Now()
	stop()
	outs := load.collect()
	lists := listed()

	told, slowest, failed := s.checkCreatesDuringFault(t, "while a node was cut off", outs)
	lists.check(t, "while a node was cut off")
	back := s.waitAnswering(t, onVictim, healed)
	// The front places on the node again: it left the front's view with
	// the first call that went unanswered and must come back.
	again, _ := s.createUntilOn(t, victim, 1)
	placed := time.Since(healed)

	all := slices.Concat(pre, told, again)
	for _, sb := range all {
		if code := s.get(t, sb.ID); code != http.StatusOK {
			t.Errorf("sandbox %s after the link healed: %d", sb.ID, code)
		}
	}
	// The claim the cut began with was granted for a create the front
	// then placed elsewhere: claimed for nobody until the front's re-check
	// of claims that got no answer releases it.
	var orphans []string
	for id := range behindCut {
		if !slices.ContainsFunc(all, func(c created) bool { return sandbox.SameID(c.ID, id) }) {
			orphans = append(orphans, id)
		}
	}
	if len(orphans) == 0 {
		t.Errorf("the node granted no claim behind the cut; the cut began as a claim reached it")
	}
	s.checkReleased(t, s.direct, all)
	released := time.Since(healed)
	t.Logf("FAULT node-partition: cut=%v creates=%d failed=%d create-slowest=%v lists=%d list-failures=%d list-slowest=%v peer-still-names-it=%t cut-sandboxes-answer-after=%v placed-on-again-after=%v (%d creates) granted-behind-the-cut=%d released-after<=%v",
		healed.Sub(cut).Round(time.Millisecond), len(outs), failed, slowest.Round(time.Millisecond),
		lists.count, lists.failures, lists.slowest.Round(time.Millisecond), peersCut,
		back.Round(time.Millisecond), placed.Round(time.Millisecond), len(again), len(orphans), released.Round(time.Millisecond))
	s.checkNoGrowth(t, held, all)
}

// isClaim matches a claim request on its way to a node.
func isClaim(chunk []byte) bool { return bytes.HasPrefix(chunk, []byte("POST /v1/claim ")) }

// peersNaming reports whether the node at direct lists addr among its
// peers.
func (s *stack) peersNaming(t *testing.T, direct, addr string) bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	peers, err := s.node(t, direct).Peers(ctx)
	if err != nil {
		t.Fatalf("peers of %s: %v", direct, err)
	}
	return slices.Contains(peers, addr)
}
