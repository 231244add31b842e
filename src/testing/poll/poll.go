// Package poll is the one way tests wait for something another goroutine
// or process will make true: a condition polled with backoff until it
// holds or a generous deadline passes. It is for conditions no channel or
// event announces (a file on disk, a node's answer, a published object);
// code that can wait on a channel should.
package poll

import (
	"testing"
	"time"
)

// Timeout bounds every wait. It is far above what any condition takes on
// an idle machine, so that a busy CI machine (other tests, builds, a load
// generator on the same cores) still sees the condition hold.
const Timeout = time.Minute

// The first poll comes at once, the next after firstInterval, doubling to
// maxInterval: a condition that holds within a millisecond costs about a
// millisecond, and a slow one costs a poll every maxInterval.
const (
	firstInterval = time.Millisecond
	maxInterval   = 50 * time.Millisecond
)

// Until waits until cond holds and fails the test, naming what it waited
// for, if it does not within Timeout.
func Until(t testing.TB, what string, cond func() bool) {
	t.Helper()
	UntilNil(t, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilNil waits until cond returns nil and fails the test with what and
// cond's last error if it does not within Timeout.
func UntilNil(t testing.TB, what string, cond func() error) {
	t.Helper()
	if err := wait(Timeout, cond); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", Timeout, what, err)
	}
}

// UntilWithin is Until with a bound of its own, for waits that scale with
// what a benchmark or a run target was asked to do (thousands of sandboxes)
// rather than with the machine's load.
func UntilWithin(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if err := wait(timeout, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	}); err != nil {
		t.Fatalf("timed out after %v waiting for %s: %v", timeout, what, err)
	}
}

// wait polls cond until it returns nil or timeout passes, returning its
// last error then.
func wait(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	interval := firstInterval
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !time.Now().Before(deadline) {
			return err
		}
		time.Sleep(min(interval, time.Until(deadline)))
		interval = min(2*interval, maxInterval)
	}
}

type notYet struct{}

func (notYet) Error() string { return "the condition never held" }

var errNotYet error = notYet{}
