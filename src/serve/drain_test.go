package serve

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// TestDrainReportsFirstAndStopsAfterTheDelay: readiness fails at the
// signal, while the parts keep running until the delay has passed on the
// drain's clock, and not a moment before.
func TestDrainReportsFirstAndStopsAfterTheDelay(t *testing.T) {
	const delay = 5 * time.Second
	clk := clocktesting.NewFakeClock(time.Now())
	signal, send := context.WithCancel(context.Background())
	d := NewDrainWithClock(signal, delay, nil, clk)
	if d.Draining() || d.Context().Err() != nil {
		t.Fatal("draining before the signal")
	}
	send()
	// The signal's AfterFunc sets Draining, then arms the delay.
	poll.Until(t, "the drain to arm its delay", clk.HasWaiters)
	if !d.Draining() {
		t.Fatal("the delay was armed before readiness failed")
	}
	clk.Step(delay - time.Nanosecond)
	if d.Context().Err() != nil {
		t.Fatal("the parts were stopped before the delay had passed")
	}
	clk.Step(time.Nanosecond)
	select {
	case <-d.Context().Done():
	case <-time.After(poll.Timeout):
		t.Fatal("the parts were not stopped once the delay had passed")
	}
}

func TestDrainWithoutDelayStopsAtTheSignal(t *testing.T) {
	signal, send := context.WithCancel(context.Background())
	d := NewDrain(signal, 0, nil)
	send()
	select {
	case <-d.Context().Done():
	case <-time.After(poll.Timeout):
		t.Fatal("a drain without delay did not stop")
	}
	if !d.Draining() {
		t.Fatal("stopped without reporting draining")
	}
}
