package build

import "time"

// Outcome is how a started build ended, as an Observer hears it.
type Outcome string

// The outcomes of a build. Every started build ends with exactly one.
const (
	// OutcomeReady: the Runner published the template.
	OutcomeReady Outcome = "ready"
	// OutcomeError: a step failed, the build ran past its timeout, or the
	// process stopped before or while it ran.
	OutcomeError Outcome = "error"
	// OutcomeCanceled: Cancel ended it (its template was deleted), while
	// it ran or while it was queued.
	OutcomeCanceled Outcome = "canceled"
)

// Outcomes lists every Outcome.
var Outcomes = []Outcome{OutcomeReady, OutcomeError, OutcomeCanceled}

// Observer is told what the Manager's builds do, in the package's own
// terms; the metrics package counts and times them. It may be called with
// the Manager's lock held, so it must not block nor call the Manager.
type Observer interface {
	// ObserveBuild: a started build (one that Start handed its
	// definition) ended with outcome after running for ran, from the
	// moment it got a slot to its end; a build that ended while queued
	// ran 0. A build registered and never started was never a build of
	// the queue and is not told.
	ObserveBuild(outcome Outcome, ran time.Duration)
	// ObserveSlots: how many started builds wait for a slot and how many
	// run, after every change of either. Calls come in the order the
	// changes happened, so the last one is the current state.
	ObserveSlots(queued, running int)
}

// unobserved is the Observer of a Manager configured without one.
type unobserved struct{}

func (unobserved) ObserveBuild(Outcome, time.Duration) {}
func (unobserved) ObserveSlots(int, int)               {}
