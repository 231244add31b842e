package build_test

import (
	"cmp"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// ended is one ObserveBuild call.
type ended struct {
	outcome build.Outcome
	ran     time.Duration
}

// slots is one ObserveSlots call.
type slots struct{ queued, running int }

// recorder is an Observer that keeps every call.
type recorder struct {
	mu     sync.Mutex
	builds []ended
	slots  []slots
}

func (r *recorder) ObserveBuild(outcome build.Outcome, ran time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.builds = append(r.builds, ended{outcome, ran})
}

func (r *recorder) ObserveSlots(queued, running int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.slots = append(r.slots, slots{queued, running})
}

func (r *recorder) ended() []ended {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.builds)
}

func (r *recorder) sawSlots(want slots) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Contains(r.slots, want)
}

func (r *recorder) lastSlots() slots {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.slots) == 0 {
		return slots{}
	}
	return r.slots[len(r.slots)-1]
}

// TestObserverHearsEveryEnd drives one slot through a build that
// succeeds, one that fails, one canceled while it runs and one canceled
// in the queue: each ends once under its outcome, timed from its slot
// (the queued wait excluded, 0 for the one that never ran), and the
// slots reported end at nothing waiting and nothing running. A build
// registered and never started is not a build of the queue.
func TestObserverHearsEveryEnd(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rec := &recorder{}
	g := newGate()
	m := build.NewManager(build.Config{Parallel: 1, Clock: clk, Observer: rec}, g.run)
	defer m.Close()

	ok, failing := register(t, m, "ok"), register(t, m, "failing")
	if err := m.Start(ok, "def"); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(failing, "def"); !errors.Is(err, build.ErrQueued) {
		t.Fatalf("second start on one slot: %v, want ErrQueued", err)
	}
	if !rec.sawSlots(slots{queued: 1, running: 1}) {
		t.Fatalf("slots reported %v, want one queued and one running after the second start", rec.lastSlots())
	}
	g.waitStarted(t, 1)
	// The queued build's wait from here is not its running time.
	clk.Step(3 * time.Second)
	g.ch("ok") <- nil
	g.waitStarted(t, 2)
	clk.Step(2 * time.Second)
	g.ch("failing") <- &build.Failure{Step: "1", Message: "command exited with code 1"}
	waitStatus(t, failing, build.Error)
	// The failed build's slot frees just after its status is final.
	poll.Until(t, "the failed build's slot to free", func() bool { return rec.lastSlots() == slots{} })

	running, queued := register(t, m, "canceled-running"), register(t, m, "canceled-queued")
	if err := m.Start(running, "def"); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(queued, "def"); !errors.Is(err, build.ErrQueued) {
		t.Fatal(err)
	}
	g.waitStarted(t, 3)
	clk.Step(time.Second)
	<-m.Cancel("ns", queued.TemplateID)
	<-m.Cancel("ns", running.TemplateID)
	register(t, m, "never-started")

	want := []ended{
		{build.OutcomeReady, 3 * time.Second},
		{build.OutcomeError, 2 * time.Second},
		{build.OutcomeCanceled, 0},
		{build.OutcomeCanceled, time.Second},
	}
	if got := rec.ended(); !slices.Equal(got, want) {
		t.Fatalf("builds observed %v, want %v", got, want)
	}
	poll.Until(t, "the slots to report nothing queued or running", func() bool {
		return rec.lastSlots() == slots{}
	})
	m.Close()
	if got := rec.ended(); len(got) != len(want) {
		t.Fatalf("Close told of a build that was never started: %v", got[len(want):])
	}
}

// TestCloseEndsQueuedBuildsAsErrors: builds the process stops before
// they got a slot end in error, having run for nothing.
func TestCloseEndsQueuedBuildsAsErrors(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	rec := &recorder{}
	g := newGate()
	m := build.NewManager(build.Config{Parallel: 1, Clock: clk, Observer: rec}, g.run)
	running, queued := register(t, m, "running"), register(t, m, "queued")
	if err := m.Start(running, "def"); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(queued, "def"); !errors.Is(err, build.ErrQueued) {
		t.Fatal(err)
	}
	g.waitStarted(t, 1)
	clk.Step(time.Second)
	m.Close()
	// Close fails the queued build while the running one's Runner
	// returns: either may end first.
	got := rec.ended()
	slices.SortFunc(got, func(a, b ended) int { return cmp.Compare(a.ran, b.ran) })
	if want := []ended{{build.OutcomeError, 0}, {build.OutcomeError, time.Second}}; !slices.Equal(got, want) {
		t.Fatalf("builds observed at Close %v, want %v: the queued one having run for nothing", got, want)
	}
	if last := rec.lastSlots(); last != (slots{}) {
		t.Fatalf("slots after Close %v, want none queued or running", last)
	}
}
