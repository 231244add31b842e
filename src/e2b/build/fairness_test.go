package build_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
)

// endless is a Runner whose builds run until their context ends; entered
// hears each build as its runner is entered, ended as it returns.
type endless struct {
	entered chan *build.Build
	ended   chan *build.Build
}

func newEndless() *endless {
	return &endless{entered: make(chan *build.Build, 16), ended: make(chan *build.Build, 16)}
}

func (e *endless) run(ctx context.Context, b *build.Build) error {
	e.entered <- b
	<-ctx.Done()
	e.ended <- b
	return ctx.Err()
}

func (e *endless) next(t *testing.T) *build.Build {
	t.Helper()
	select {
	case b := <-e.entered:
		return b
	case <-time.After(30 * time.Second):
		t.Fatal("no build entered its runner")
		return nil
	}
}

// One namespace starting more endless builds than there are slots cannot
// take them all: another namespace's build still starts at once, and the
// first namespace's queued builds know their place.
func TestNamespaceCannotHoldEverySlot(t *testing.T) {
	for _, parallel := range []int{2, 3} {
		e := newEndless()
		m := build.NewManager(build.Config{Parallel: parallel}, e.run)
		var greedy []*build.Build
		for i := range parallel + 1 {
			b := registerIn(t, m, "greedy", "t"+string(rune('a'+i)))
			if err := m.Start(b, "def"); err != nil && !errors.Is(err, build.ErrQueued) {
				t.Fatal(err)
			}
			greedy = append(greedy, b)
		}
		for range parallel - 1 {
			e.next(t)
		}
		other := registerIn(t, m, "other", "mine")
		if err := m.Start(other, "def"); err != nil {
			t.Fatalf("parallel %d: another namespace's build with %d endless builds of one namespace: %v, want started", parallel, parallel+1, err)
		}
		if got := e.next(t); got != other {
			t.Fatalf("parallel %d: %s/%s entered the runner, want the other namespace's build", parallel, got.Namespace, got.Name)
		}
		queued := greedy[parallel-1:]
		for i, b := range queued {
			v := b.View(0, 0)
			if v.Status != build.Waiting || v.QueuePosition != i+1 {
				t.Errorf("parallel %d: queued build %s is %s at position %d, want waiting at %d", parallel, b.Name, v.Status, v.QueuePosition, i+1)
			}
			if last := v.Logs[len(v.Logs)-1].Message; !strings.Contains(last, "position "+string(rune('0'+i+1))+" in the build queue") {
				t.Errorf("parallel %d: queued build %s logs %q, want its position", parallel, b.Name, last)
			}
		}
		m.Close()
	}
}

// When a slot frees, the namespace running the fewest builds goes first,
// even when another namespace queued earlier.
func TestFreedSlotGoesToTheNamespaceRunningFewest(t *testing.T) {
	e := newEndless()
	m := build.NewManager(build.Config{Parallel: 3}, e.run)
	defer m.Close()
	start := func(b *build.Build) {
		if err := m.Start(b, "def"); err != nil && !errors.Is(err, build.ErrQueued) {
			t.Fatal(err)
		}
	}
	a1, a2, a3 := registerIn(t, m, "a", "one"), registerIn(t, m, "a", "two"), registerIn(t, m, "a", "three")
	b1, b2 := registerIn(t, m, "b", "one"), registerIn(t, m, "b", "two")
	for _, b := range []*build.Build{a1, a2, a3, b1, b2} {
		start(b)
	}
	// a runs two (all but one slot), b one; a3 and b2 wait, b2 first
	// although a3 queued earlier: b runs fewer builds.
	for range 3 {
		e.next(t)
	}
	if a3.View(0, 0).QueuePosition != 2 || b2.View(0, 0).QueuePosition != 1 {
		t.Fatalf("positions a3 %d, b2 %d; want 2 and 1", a3.View(0, 0).QueuePosition, b2.View(0, 0).QueuePosition)
	}
	// b's build ends: b runs none, a two, so b2 takes the slot.
	<-m.Cancel("b", b1.TemplateID)
	if got := e.next(t); got != b2 {
		t.Fatalf("%s/%s took the freed slot, want b/two", got.Namespace, got.Name)
	}
	if a3.Status() != build.Waiting {
		t.Fatalf("a/three is %s, want waiting", a3.Status())
	}
}

// Cancel ends a running build through its context, and its channel closes
// only once the runner has returned; a queued build ends without running.
func TestCancelStopsBuilds(t *testing.T) {
	e := newEndless()
	m := build.NewManager(build.Config{Parallel: 2}, e.run)
	defer m.Close()
	running, queued := register(t, m, "running"), register(t, m, "queued")
	if err := m.Start(running, "def"); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(queued, "def"); !errors.Is(err, build.ErrQueued) {
		t.Fatalf("second build of one namespace with two slots: %v, want ErrQueued", err)
	}
	e.next(t)
	done := m.Cancel("ns", running.TemplateID)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("Cancel did not end the running build")
	}
	select {
	case b := <-e.ended:
		if b != running {
			t.Fatalf("%s ended, want running", b.Name)
		}
	default:
		t.Fatal("Cancel's channel closed before the runner returned")
	}
	v := running.View(0, 0)
	if v.Status != build.Error || v.Reason == nil || !strings.Contains(v.Reason.Message, "canceled") {
		t.Fatalf("canceled build: %s %+v", v.Status, v.Reason)
	}
	// The freed slot went to the queued build; cancel it too.
	if got := e.next(t); got != queued {
		t.Fatalf("%s entered, want queued", got.Name)
	}
	<-m.Cancel("ns", queued.TemplateID)
	waiting := register(t, m, "never-started")
	<-m.Cancel("ns", waiting.TemplateID)
	if waiting.Status() != build.Error {
		t.Fatalf("a build canceled before it started is %s, want error", waiting.Status())
	}
}

// A template whose last build record expires is handed to Expired, so
// what its builds uploaded can go with it.
func TestExpiredTemplateIsReported(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Now())
	expired := make(chan string, 4)
	fail := func(context.Context, *build.Build) error { return &build.Failure{Message: "boom"} }
	m := build.NewManager(build.Config{Clock: clk, Retention: time.Hour, Expired: func(ns, id string) { expired <- ns + "/" + id }}, fail)
	defer m.Close()
	b := register(t, m, "failing")
	if err := m.Start(b, "def"); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, b, build.Error)
	clk.Step(2 * time.Hour)
	if got := m.Builds("ns"); len(got) != 0 {
		t.Fatalf("%d builds kept past the retention", len(got))
	}
	select {
	case got := <-expired:
		if got != "ns/"+b.TemplateID {
			t.Fatalf("expired %s, want ns/%s", got, b.TemplateID)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Expired was not called")
	}
}
