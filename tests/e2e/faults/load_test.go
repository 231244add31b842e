package faults_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// createUntilOn creates sandboxes until n of them are on the node at
// direct (placement is random: the power of two choices) and returns all
// it created and those on that node. It fails the test when that takes
// more than poll.Timeout, so it also shows the front places on that node.
// Each poll creates one.
func (s *stack) createUntilOn(t *testing.T, direct string, n int) (all, on []created) {
	t.Helper()
	poll.UntilNil(t, fmt.Sprintf("creates to place %d sandboxes on %s", n, direct), func() error {
		if len(on) >= n {
			return nil
		}
		o := s.create(context.Background())
		if o.err != nil {
			t.Fatal(o.err)
		}
		all = append(all, o.sb)
		if a, _ := ownerOf(s.owners(t, s.direct), o.sb.ID); a == direct {
			on = append(on, o.sb)
		}
		if len(on) < n {
			return fmt.Errorf("%d creates placed %d there", len(all), len(on))
		}
		return nil
	})
	return all, on
}

// listLoad is one client listing back to back, as a dashboard would.
type listLoad struct {
	count, failures int
	slowest         time.Duration
}

// listLoad lists until ctx ends; the returned function waits for the
// client and returns what it saw.
func (s *stack) listLoad(t *testing.T, ctx context.Context) func() listLoad {
	var l listLoad
	var wg sync.WaitGroup
	wg.Go(func() {
		for ctx.Err() == nil {
			start := time.Now()
			code := s.list(t)
			l.count++
			if code != http.StatusOK {
				l.failures++
			}
			l.slowest = max(l.slowest, time.Since(start))
		}
	})
	return func() listLoad {
		wg.Wait()
		return l
	}
}

// check fails the test when a list failed during the fault.
func (l listLoad) check(t *testing.T, during string) {
	t.Helper()
	if l.failures > 0 {
		t.Errorf("%d of %d lists failed %s", l.failures, l.count, during)
	}
}

// checkCreatesDuringFault fails the test for every create that failed,
// when none succeeded, and when one took longer than the node timeout
// allows: a node that does not answer costs a create at most one node
// timeout before the front places it elsewhere. It returns the sandboxes
// the clients were told about, the slowest create and the failures.
func (s *stack) checkCreatesDuringFault(t *testing.T, during string, outs []outcome) (told []created, slowest time.Duration, failed int) {
	t.Helper()
	for _, o := range outs {
		slowest = max(slowest, o.end.Sub(o.start))
		if o.err != nil {
			failed++
			t.Errorf("create %s: %v", during, o.err)
			continue
		}
		told = append(told, o.sb)
	}
	if len(told) == 0 {
		t.Fatalf("no create succeeded %s", during)
	}
	if slowest > nodeTimeout+2*time.Second {
		t.Errorf("a create took %v %s; the node timeout is %v", slowest, during, nodeTimeout)
	}
	return told, slowest, failed
}

// waitAnswering waits until every sandbox in sbs answers through the data
// plane, failing the test after poll.Timeout, and returns how long after
// since the last of them first answered.
func (s *stack) waitAnswering(t *testing.T, sbs []created, since time.Time) time.Duration {
	t.Helper()
	c := &http.Client{Timeout: clientTimeout}
	defer c.CloseIdleConnections()
	var back time.Duration
	for _, sb := range sbs {
		poll.UntilNil(t, "sandbox "+sb.ID+" to answer through the data plane", func() error { return s.echo(c, sb) })
		back = max(back, time.Since(since))
	}
	return back
}
