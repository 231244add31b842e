package e2b

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"k8s.io/utils/clock"
)

// autoPauser carries out e2b's onTimeout "pause" (autoPause on create):
// when such a sandbox's timeout comes it is paused instead of removed.
// sandboxd removes a sandbox when its lease ends, hibernated or not, so the
// surface hibernates it a little before the end (lead) and then renews the
// lease for retention, how long a paused sandbox is kept.
//
// The timers live in this process; the sandbox's claim label says it is
// an auto-pause one, and every replica's sweep (autopausesweep.go) arms
// the pause of such a sandbox whose timeout is near, so it happens even
// when the replica that took the create is gone.
type autoPauser struct {
	fleet     Fleet
	log       *slog.Logger
	clock     clock.PassiveClock
	lead      time.Duration
	retention time.Duration
	// paused reports a done auto-pause: the sandbox's new deadline.
	paused func(id string, deadline time.Time)

	mu     sync.Mutex
	timers map[string]*time.Timer
	closed bool
	inway  sync.WaitGroup
}

func newAutoPauser(f Fleet, log *slog.Logger, clk clock.PassiveClock, lead, retention time.Duration,
	paused func(string, time.Time)) *autoPauser {
	return &autoPauser{
		fleet: f, log: log, clock: clk, lead: lead, retention: retention, paused: paused,
		timers: map[string]*time.Timer{},
	}
}

// schedule (re)arms sb's pause for lead before deadline, or at once when
// that moment has passed.
func (a *autoPauser) schedule(sb fleet.Sandbox, deadline time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return
	}
	if t := a.timers[sb.ID]; t != nil {
		t.Stop()
	}
	delay := max(deadline.Sub(a.clock.Now())-a.lead, 0)
	var t *time.Timer
	t = time.AfterFunc(delay, func() {
		a.mu.Lock()
		if a.closed || a.timers[sb.ID] != t {
			a.mu.Unlock()
			return
		}
		delete(a.timers, sb.ID)
		a.inway.Add(1)
		a.mu.Unlock()
		defer a.inway.Done()
		a.pause(sb)
	})
	a.timers[sb.ID] = t
}

// cancel forgets sb's pause (a kill).
func (a *autoPauser) cancel(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if t := a.timers[id]; t != nil {
		t.Stop()
		delete(a.timers, id)
	}
}

// pending reports whether id has a pause scheduled.
func (a *autoPauser) pending(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.timers[id] != nil
}

// close stops every scheduled pause and waits for those under way.
func (a *autoPauser) close() {
	a.mu.Lock()
	a.closed = true
	for id, t := range a.timers {
		t.Stop()
		delete(a.timers, id)
	}
	a.mu.Unlock()
	a.inway.Wait()
}

// pauseTimeout bounds one auto-pause: the hibernate and the renew.
const pauseTimeout = 30 * time.Second

// pause hibernates sb (already hibernated is fine: a manual pause came
// first) and keeps it for retention. A failure is logged: the sandbox is
// then removed at its deadline, as without autoPause.
func (a *autoPauser) pause(sb fleet.Sandbox) {
	ctx, cancel := context.WithTimeout(context.Background(), pauseTimeout)
	defer cancel()
	if err := a.fleet.Pause(ctx, sb); err != nil && !errors.Is(err, sandboxd.ErrConflict) {
		a.log.Warn("auto-pause: hibernate failed; the sandbox ends at its timeout", "sandbox", sb.ID, "err", err)
		return
	}
	sb.Paused = true // the renew below tells the view the sandbox as it is now
	deadline, err := a.fleet.Renew(ctx, sb, int(a.retention/time.Second))
	if err != nil {
		a.log.Warn("auto-pause: paused, but keeping it failed; it ends at its timeout", "sandbox", sb.ID, "err", err)
		return
	}
	a.log.Info("auto-paused at its timeout", "sandbox", sb.ID, "keptUntil", deadline)
	a.paused(sb.ID, deadline)
}
