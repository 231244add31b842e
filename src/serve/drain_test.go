package serve

import (
	"context"
	"runtime"
	"testing"
	"time"
)

// TestDrainReportsFirstAndStopsAfterTheDelay: readiness fails at the
// signal, while the parts keep running until the delay has passed.
func TestDrainReportsFirstAndStopsAfterTheDelay(t *testing.T) {
	signal, send := context.WithCancel(context.Background())
	d := NewDrain(signal, 300*time.Millisecond, nil)
	if d.Draining() || d.Context().Err() != nil {
		t.Fatal("draining before the signal")
	}
	sent := time.Now()
	send()
	// Draining is set by the signal's AfterFunc; the parts' context is
	// still live then, for the delay.
	for !d.Draining() {
		runtime.Gosched()
	}
	if d.Context().Err() != nil {
		t.Fatal("the parts were stopped at the signal, before the delay")
	}
	<-d.Context().Done()
	if waited := time.Since(sent); waited < 300*time.Millisecond {
		t.Fatalf("the parts were stopped %v after the signal, before the 300ms delay", waited)
	}
}

func TestDrainWithoutDelayStopsAtTheSignal(t *testing.T) {
	signal, send := context.WithCancel(context.Background())
	d := NewDrain(signal, 0, nil)
	send()
	select {
	case <-d.Context().Done():
	case <-time.After(10 * time.Second):
		t.Fatal("a drain without delay did not stop")
	}
	if !d.Draining() {
		t.Fatal("stopped without reporting draining")
	}
}
