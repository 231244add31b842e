package admission

import (
	"strconv"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestAdmissionForgetsIdleClients(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	a := NewCreateGate(10, 2, 0, clk)
	for i := range 3 * minSweep {
		if ok, _ := a.Take(strconv.Itoa(i)); !ok {
			t.Fatalf("a fresh client's first create was refused")
		}
	}
	// Every bucket refills within burst/rate; the next sweep drops them.
	clk.SetTime(clk.Now().Add(time.Second))
	a.mu.Lock()
	a.sweepLocked(clk.Now())
	n := len(a.buckets)
	a.mu.Unlock()
	if n != 0 {
		t.Errorf("%d full buckets survived a sweep", n)
	}
}

func TestAdmissionRetryAfter(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Unix(1000, 0))
	a := NewCreateGate(0.5, 1, 0, clk)
	if ok, _ := a.Take("c"); !ok {
		t.Fatal("first create refused")
	}
	if ok, wait := a.Take("c"); ok || wait != 2*time.Second {
		t.Errorf("second create = %v, wait %v; want refused, 2s", ok, wait)
	}
}

func TestAdmissionTicketsLeaveNothingBehind(t *testing.T) {
	a := NewCreateGate(0, 1, 1, clocktesting.NewFakePassiveClock(time.Unix(1000, 0)))
	t1, t2 := a.Begin("s"), a.Begin("s")
	if !t1.Admit(0) {
		t.Fatal("first create refused under the cap")
	}
	// t2 listed before t1's sandbox existed (its list shows none); t1
	// finishing since counts for it.
	t1.Done(true)
	if t2.Admit(0) {
		t.Error("a create that listed before another finished slipped past the cap")
	}
	t2.Done(false) // refused: a no-op
	t3 := a.Begin("s")
	t3.Done(false) // its list failed
	var nilTicket *Ticket
	nilTicket.Done(true)
	if len(a.scopes) != 0 {
		t.Errorf("scopes left behind: %v", a.scopes)
	}
}
