package admission

import (
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"
)

// CreateGate bounds what one client may create: a token bucket per client
// (an API key; an anonymous caller's source address) for the create rate,
// and, per scope (a key's namespace; an anonymous caller's source), a cap
// on live sandboxes. The live count itself comes from the fleet (the
// caller lists it between Begin and Admit); the gate only adds the creates
// the fleet cannot show yet, so the cap holds under concurrent creates
// without a count of its own that could drift from the fleet.
type CreateGate struct {
	limit   rate.Limit // 0: no rate limit
	burst   int
	maxLive int // 0: no cap
	clock   clock.PassiveClock

	mu      sync.Mutex
	buckets map[string]*rate.Limiter
	// sweepAt is the bucket count that triggers the next sweep; it
	// doubles with what survives one, so sweeping stays amortized O(1).
	sweepAt int
	scopes  map[string]*scopeState
}

// scopeState is one scope's creates under way in this process.
type scopeState struct {
	// creating are admitted creates whose claim has not finished.
	creating int
	// finished counts the admitted creates that ended with a sandbox; a
	// fleet list begun before one finished may miss its sandbox.
	finished uint64
	// counting are admissions between their fleet list and their
	// decision; the state stays while any holds a mark of finished.
	counting int
}

// minSweep is the smallest bucket count that triggers a sweep.
const minSweep = 1024

// NewCreateGate returns a gate of limit creates per second per client in
// bursts of burst, and maxLive live sandboxes per scope. A limit or
// maxLive of 0 lifts that bound.
func NewCreateGate(limit rate.Limit, burst, maxLive int, clk clock.PassiveClock) *CreateGate {
	return &CreateGate{
		limit: limit, burst: burst, maxLive: maxLive, clock: clk,
		buckets: map[string]*rate.Limiter{}, sweepAt: minSweep, scopes: map[string]*scopeState{},
	}
}

// MaxLive is the live-sandbox cap of one scope; 0 when there is none.
func (a *CreateGate) MaxLive() int { return a.maxLive }

// Take spends one create of client's bucket. When the bucket is empty it
// returns false and how long until the next token.
func (a *CreateGate) Take(client string) (bool, time.Duration) {
	if a.limit <= 0 {
		return true, 0
	}
	now := a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	b := a.buckets[client]
	if b == nil {
		if len(a.buckets) >= a.sweepAt {
			a.sweepLocked(now)
		}
		b = rate.NewLimiter(a.limit, a.burst)
		a.buckets[client] = b
	}
	if b.AllowN(now, 1) {
		return true, 0
	}
	missing := 1 - b.TokensAt(now)
	return false, time.Duration(math.Ceil(missing / float64(a.limit) * float64(time.Second)))
}

// sweepLocked forgets every full bucket: a full bucket is what a client
// never seen before gets, so forgetting it changes nothing, and the map
// stays bounded by the clients active within one refill (burst/rate).
func (a *CreateGate) sweepLocked(now time.Time) {
	for k, b := range a.buckets {
		if b.TokensAt(now) >= float64(a.burst) {
			delete(a.buckets, k)
		}
	}
	a.sweepAt = max(minSweep, 2*len(a.buckets))
}

// Ticket is one create's passage through the live-sandbox cap.
type Ticket struct {
	a     *CreateGate
	scope string
	mark  uint64
	state int // 0 counting, 1 admitted, 2 done
}

// Begin starts an admission for scope; call it before listing the fleet,
// then Admit the ticket, or Done it when the list failed.
func (a *CreateGate) Begin(scope string) *Ticket {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.scopes[scope]
	if s == nil {
		s = &scopeState{}
		a.scopes[scope] = s
	}
	s.counting++
	return &Ticket{a: a, scope: scope, mark: s.finished}
}

// Admit decides the ticket given live, the scope's sandboxes the fleet
// listed after Begin. Creates under way, and those that finished since
// Begin (which the list may or may not show), count as live: the cap is
// never exceeded, at worst a create racing a finished one is refused
// early.
func (t *Ticket) Admit(live int) bool {
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.scopes[t.scope]
	s.counting--
	t.state = 2
	if live+s.creating+int(s.finished-t.mark) >= a.maxLive {
		a.forgetLocked(t.scope, s)
		return false
	}
	s.creating++
	t.state = 1
	return true
}

// Done ends an admitted create; created says whether a sandbox now exists.
// It is a no-op for a nil ticket and for one that was refused or is
// already done, and drops one that never reached Admit (its fleet list
// failed).
func (t *Ticket) Done(created bool) {
	if t == nil {
		return // no cap: nothing was reserved
	}
	a := t.a
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.scopes[t.scope]
	switch t.state {
	case 0:
		s.counting--
	case 1:
		s.creating--
		if created {
			s.finished++
		}
	default:
		return
	}
	t.state = 2
	a.forgetLocked(t.scope, s)
}

// forgetLocked drops a scope nothing refers to any more, so the map holds
// only scopes with creates or admissions under way.
func (a *CreateGate) forgetLocked(scope string, s *scopeState) {
	if s.creating == 0 && s.counting == 0 {
		delete(a.scopes, scope)
	}
}
