package poll

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

func TestWaitReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	err := wait(time.Minute, func() error {
		if calls.Add(1) < 4 {
			return errors.New("not yet")
		}
		return nil
	})
	if err != nil || calls.Load() != 4 {
		t.Fatalf("wait = %v after %d calls; want nil after 4", err, calls.Load())
	}
}

func TestWaitGivesTheLastErrorAtTheDeadline(t *testing.T) {
	var calls atomic.Int32
	err := wait(20*time.Millisecond, func() error {
		calls.Add(1)
		return errors.New("still down")
	})
	if err == nil || err.Error() != "still down" || calls.Load() < 2 {
		t.Fatalf("wait = %v after %d calls; want the condition's last error after several polls", err, calls.Load())
	}
}
