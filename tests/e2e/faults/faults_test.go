package faults_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

const (
	// createWorkers is the steady create load during a fault.
	createWorkers = 4
	// errorWindow is the documented window around a node fault inside
	// which a create may fail; outside it none may.
	errorWindow = nodeTimeout + 3*time.Second
)

// TestNodeKilledDuringCreates SIGKILLs one node process under a steady
// create load. Creates keep succeeding on the other nodes; a sandbox the
// dead node held is gone (404), never a 5xx; every other sandbox a client
// was told about answers through the data plane; nothing else stays
// claimed; the dead node leaves the mesh within three gossip rounds.
func TestNodeKilledDuringCreates(t *testing.T) {
	s := startStack(t)
	held := s.usage(t)
	victim := s.nodes[1]
	victimAddr := victim.Addrs()[0]
	survivors := []string{s.addrs()[0], s.addrs()[2]}

	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	began := time.Now()
	load := s.createLoad(ctx, createWorkers)
	// The kill comes once the load has put sandboxes on the victim, so
	// that some of what clients were told about dies with it.
	load.waitSucceeded(t, createWorkers, began, "the load began")
	poll.Until(t, "a sandbox of the load on the victim", func() bool { return len(s.owners(t, []string{victimAddr})) > 0 })
	killed := time.Now()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	left := s.waitPeers(t, survivors[0], 1)
	// Creates go on succeeding on the survivors once the dead member has
	// left the mesh, and the error window (which starts at the kill) has
	// closed for creates started after it.
	load.waitSucceeded(t, 2*createWorkers, killed.Add(max(left, errorWindow)), "the dead member left and the error window closed")
	stop()
	outs := load.collect()

	var told []created
	var failed, late int
	var before, after []time.Duration
	for _, o := range outs {
		if o.err == nil {
			told = append(told, o.sb)
			if o.start.Before(killed) {
				before = append(before, o.end.Sub(o.start))
			} else {
				after = append(after, o.end.Sub(o.start))
			}
			continue
		}
		failed++
		if o.start.After(killed.Add(errorWindow)) || o.end.Before(killed) {
			late++
			t.Errorf("create outside the fault window (started %v after the kill): %v", o.start.Sub(killed), o.err)
		}
	}
	if len(told) < 20 {
		t.Fatalf("only %d creates succeeded under load", len(told))
	}
	owners := s.owners(t, survivors)
	var gone, reachable int
	c := &http.Client{Timeout: clientTimeout}
	for _, sb := range told {
		if _, ok := ownerOf(owners, sb.ID); !ok {
			// It was on the dead node: honestly gone, never a 5xx.
			if code := s.get(t, sb.ID); code != http.StatusNotFound {
				t.Errorf("sandbox %s of the dead node answers %d, want 404", sb.ID, code)
			}
			gone++
			continue
		}
		if code := s.get(t, sb.ID); code != http.StatusOK {
			t.Errorf("sandbox %s on a live node answers %d", sb.ID, code)
		}
		if err := s.echo(c, sb); err != nil {
			t.Errorf("data plane: %v", err)
		}
		reachable++
	}
	if gone == 0 {
		t.Errorf("no create landed on the killed node %s; the fault tested nothing", victimAddr)
	}
	s.checkReleased(t, survivors, told)
	t.Logf("FAULT node-sigkill-creates: creates=%d failed=%d (outside window %d) on-dead-node=%d reachable=%d "+
		"create-p99 before=%v after=%v dead-member-left-peers-after=%v",
		len(outs), failed, late, gone, reachable, percentile(before, 99).Round(time.Millisecond),
		percentile(after, 99).Round(time.Millisecond), left.Round(time.Millisecond))
	s.checkNoGrowth(t, held, filterLive(told, owners))
}

// TestNodeKilledDuringRelays SIGKILLs a node while clients stream
// requests through the data plane to sandboxes on every node. Streams to
// the other nodes see no error at all; streams to the dead node fail fast
// (no request hangs) with a 4xx/5xx or a closed connection.
func TestNodeKilledDuringRelays(t *testing.T) {
	s := startStack(t)
	held := s.usage(t)
	var sbs []created
	for range 9 {
		o := s.create(context.Background())
		if o.err != nil {
			t.Fatal(o.err)
		}
		sbs = append(sbs, o.sb)
	}
	// The victim is the node holding the most of them: placement is
	// random, so a fixed node may hold none (about one run in 40).
	owners := s.owners(t, s.addrs())
	victim := s.nodes[0]
	most := -1
	for _, n := range s.nodes {
		held := 0
		for _, sb := range sbs {
			if a, _ := ownerOf(owners, sb.ID); a == n.Addrs()[0] {
				held++
			}
		}
		if held > most {
			victim, most = n, held
		}
	}
	onVictim := func(sb created) bool { a, _ := ownerOf(owners, sb.ID); return a == victim.Addrs()[0] }

	ctx, stop := context.WithCancel(context.Background())
	var killedAt atomic.Int64
	type stream struct {
		// ok and failed are read while the stream runs.
		ok, failed  atomic.Int64
		firstFailAt time.Time
		slowest     time.Duration
	}
	results := make([]stream, len(sbs))
	var wg sync.WaitGroup
	for i, sb := range sbs {
		wg.Go(func() {
			c := &http.Client{Timeout: clientTimeout}
			defer c.CloseIdleConnections()
			for ctx.Err() == nil {
				start := time.Now()
				err := s.echo(c, sb)
				results[i].slowest = max(results[i].slowest, time.Since(start))
				if err == nil {
					results[i].ok.Add(1)
					continue
				}
				if results[i].failed.Load() == 0 {
					results[i].firstFailAt = time.Now()
				}
				results[i].failed.Add(1)
				// A failed stream retries at a slower pace, so a dead
				// node's refusals do not spin.
				select {
				case <-ctx.Done():
				case <-time.After(50 * time.Millisecond):
				}
			}
		})
	}
	// Every stream answers before the kill, and goes on afterwards: those
	// to the victim until they fail, the others for as many answers again.
	oks := func() []int64 {
		out := make([]int64, len(sbs))
		for i := range results {
			out[i] = results[i].ok.Load()
		}
		return out
	}
	poll.Until(t, "every stream to answer before the kill", func() bool { return !slices.Contains(oks(), 0) })
	atKill := oks()
	killedAt.Store(time.Now().UnixNano())
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	poll.UntilNil(t, "the streams to the dead node to fail and the others to answer on", func() error {
		for i, sb := range sbs {
			if onVictim(sb) && results[i].failed.Load() == 0 {
				return fmt.Errorf("the stream to %s on the dead node has not failed yet", sb.ID)
			}
			if !onVictim(sb) && results[i].ok.Load() < 2*atKill[i] {
				return fmt.Errorf("the stream to %s answered %d times, %d before the kill", sb.ID, results[i].ok.Load(), atKill[i])
			}
		}
		return nil
	})
	stop()
	wg.Wait()

	killed := time.Unix(0, killedAt.Load())
	var deadStreams int
	var detect time.Duration
	for i, sb := range sbs {
		r := &results[i]
		if r.ok.Load() == 0 {
			t.Errorf("stream to %s never got an answer", sb.ID)
		}
		if r.slowest >= clientTimeout {
			t.Errorf("a request to %s hung for the client's whole timeout", sb.ID)
		}
		if !onVictim(sb) {
			if r.failed.Load() > 0 {
				t.Errorf("stream to %s on a live node failed %d times", sb.ID, r.failed.Load())
			}
			continue
		}
		deadStreams++
		if r.failed.Load() == 0 {
			t.Errorf("stream to %s on the dead node never failed", sb.ID)
			continue
		}
		detect = max(detect, r.firstFailAt.Sub(killed))
	}
	if deadStreams == 0 {
		t.Fatalf("no sandbox was on the killed node")
	}
	t.Logf("FAULT node-sigkill-relays: streams=%d on-dead-node=%d live-stream-errors=0 dead-stream-first-error-after<=%v",
		len(sbs), deadStreams, detect)
	var live []created
	for _, sb := range sbs {
		if !onVictim(sb) {
			live = append(live, sb)
		}
	}
	var liveNodes []string
	for _, a := range s.addrs() {
		if a != victim.Addrs()[0] {
			liveNodes = append(liveNodes, a)
		}
	}
	s.checkReleased(t, liveNodes, live)
	s.checkNoGrowth(t, held, live)
}

// TestHungNode SIGSTOPs a node (its sockets stay open, nothing answers)
// under create and list load, then SIGCONTs it. While it hangs, creates
// and lists keep answering (a create may wait up to the node timeout
// once per call); after it continues, its sandboxes answer again, since a
// hung node loses nothing.
func TestHungNode(t *testing.T) {
	s := startStack(t)
	held := s.usage(t)
	victim := s.nodes[1]
	pre, onVictim := s.createUntilOn(t, s.direct[1], 2)

	if err := victim.Pause(); err != nil {
		t.Fatal(err)
	}
	paused := time.Now()
	ctx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	load := s.createLoad(ctx, createWorkers)
	listed := s.listLoad(t, ctx)
	// The node hangs until creates started after the front's node timeout
	// could have passed on it succeed too: by then any call the front made
	// to the hung node has waited the timeout out.
	load.waitSucceeded(t, 2*createWorkers, paused.Add(nodeTimeout), "the node timeout after the pause")
	stop()
	outs := load.collect()
	lists := listed()

	told, slowest, failed := s.checkCreatesDuringFault(t, "while a node hung", outs)
	lists.check(t, "while a node hung")

	if err := victim.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	back := s.waitAnswering(t, onVictim, resumed)
	all := append(pre, told...)
	for _, sb := range all {
		if code := s.get(t, sb.ID); code != http.StatusOK {
			t.Errorf("sandbox %s after the node resumed: %d", sb.ID, code)
		}
	}
	s.checkReleased(t, s.direct, all)
	t.Logf("FAULT node-sigstop: hung=%v creates=%d failed=%d create-slowest=%v lists=%d list-failures=%d list-slowest=%v resumed-sandboxes-answer-after=%v",
		resumed.Sub(paused).Round(time.Millisecond), len(outs), failed, slowest.Round(time.Millisecond),
		lists.count, lists.failures, lists.slowest.Round(time.Millisecond), back.Round(time.Millisecond))
	s.checkNoGrowth(t, held, all)
}

// list answers the status of GET /sandboxes.
func (s *stack) list(t *testing.T) int {
	req, _ := http.NewRequest(http.MethodGet, "http://"+s.api+"/sandboxes", nil)
	req.Header.Set("X-API-KEY", s.key)
	resp, err := s.http.Do(req)
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("list: %v", err)
		}
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// filterLive keeps the sandboxes owners knows (those on reachable nodes).
func filterLive(told []created, owners map[string]string) []created {
	var out []created
	for _, sb := range told {
		if _, ok := ownerOf(owners, sb.ID); ok {
			out = append(out, sb)
		}
	}
	return out
}
