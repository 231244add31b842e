package e2b

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// machineFailedError is a sandbox whose machine died (sandboxd's failed
// state): to e2b it is gone, as a sandbox whose VM crashed is on e2b, so
// it matches fleet.ErrNotFound, and its message says why.
type machineFailedError struct {
	id, reason string
}

func (e *machineFailedError) Error() string {
	return fmt.Sprintf("sandbox %s is gone: its machine failed (%s)", e.id, e.reason)
}

func (e *machineFailedError) Unwrap() error { return fleet.ErrNotFound }

// writeGone answers a sandbox that is not there: 404 with the reason when
// its machine failed, e2b's plain not-found otherwise.
func writeGone(w http.ResponseWriter, err error) {
	var mf *machineFailedError
	if errors.As(err, &mf) {
		writeError(w, http.StatusNotFound, mf.Error())
		return
	}
	writeNotFound(w)
}

// liveFleet is the Fleet as e2b shows it: a sandbox whose machine failed is
// gone. It is left out of lists (so it no longer counts against a key's
// concurrent-sandbox cap), a lookup of it is machineFailedError, and its
// claim is released on its node in the background, which frees the node's
// and the tenant's max_claims too. sandboxd keeps a failed claim (a wake
// would boot it again from its disk, memory lost), but e2b has no such
// state: its SDK sees a sandbox whose VM died as killed.
type liveFleet struct {
	Fleet
	clock clock.PassiveClock
	// gone is told of each failed sandbox this process releases, once.
	gone func(fleet.Sandbox)

	mu        sync.Mutex
	releasing map[string]time.Time // failed sandbox id → its deadline
}

func newLiveFleet(f Fleet, clk clock.PassiveClock, gone func(fleet.Sandbox)) *liveFleet {
	return &liveFleet{Fleet: f, clock: clk, gone: gone, releasing: map[string]time.Time{}}
}

// failed reports whether sb's machine failed, and releases it the first
// time it is seen so.
func (l *liveFleet) failed(sb fleet.Sandbox) bool {
	if sb.Failed == "" {
		return false
	}
	now := l.clock.Now()
	l.mu.Lock()
	_, seen := l.releasing[sb.ID]
	if !seen {
		// Forget releases whose lease has ended: the node has reaped
		// those sandboxes if the release never reached it.
		for id, deadline := range l.releasing {
			if now.After(deadline) {
				delete(l.releasing, id)
			}
		}
		l.releasing[sb.ID] = sb.Deadline
	}
	l.mu.Unlock()
	if !seen {
		l.gone(sb)
		l.Abandon(sb)
	}
	return true
}

func (l *liveFleet) List(ctx context.Context, namespace string) ([]fleet.Sandbox, error) {
	sbs, err := l.Fleet.List(ctx, namespace)
	if err != nil {
		return nil, err
	}
	out := sbs[:0:0]
	for _, sb := range sbs {
		if !l.failed(sb) {
			out = append(out, sb)
		}
	}
	return out, nil
}

func (l *liveFleet) Find(ctx context.Context, namespace, id string) (fleet.Sandbox, error) {
	sb, err := l.Fleet.Find(ctx, namespace, id)
	if err == nil && l.failed(sb) {
		return fleet.Sandbox{}, &machineFailedError{id: id, reason: sb.Failed}
	}
	return sb, err
}

func (l *liveFleet) Current(ctx context.Context, sb fleet.Sandbox) (fleet.Sandbox, *sandboxd.Sandbox, error) {
	cur, row, err := l.Fleet.Current(ctx, sb)
	if err == nil && l.failed(cur) {
		return sb, nil, &machineFailedError{id: sb.ID, reason: cur.Failed}
	}
	return cur, row, err
}
