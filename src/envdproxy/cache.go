package envdproxy

import (
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
)

// owner is where a sandbox lives and, once read from its node, the
// credentials that go with it.
type owner struct {
	addr string
	// claim is the sandbox's own sandboxd token. It opens the relay and
	// never leaves the proxy. Empty when only the address is known.
	claim string
	// derived is the access token a client must present,
	// envdtoken.Derive(secret, claim).
	derived string
	// wakes is e2b's autoResume, read from the sandbox's claim labels:
	// traffic may wake it when it is paused (see sandbox.LabelAutoResume).
	wakes bool
}

type cacheEntry struct {
	owner
	expires time.Time
}

// ownerCache keeps owners for a fixed time. It holds only sandboxes some
// node confirmed, so its size is bounded by the fleet's live sandboxes;
// expired entries are swept once the map has doubled since the last sweep.
type ownerCache struct {
	ttl time.Duration

	mu      sync.Mutex
	entries map[string]cacheEntry
	sweepAt int
}

const minSweep = 1024

func newOwnerCache(ttl time.Duration) *ownerCache {
	return &ownerCache{ttl: ttl, entries: map[string]cacheEntry{}, sweepAt: minSweep}
}

func (c *ownerCache) get(id string, now time.Time) (owner, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[id]
	if !ok {
		return owner{}, false
	}
	if !now.Before(e.expires) {
		delete(c.entries, id)
		return owner{}, false
	}
	return e.owner, true
}

func (c *ownerCache) put(id string, o owner, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries[id] = cacheEntry{owner: o, expires: now.Add(c.ttl)}
	if len(c.entries) >= c.sweepAt {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		c.sweepAt = max(minSweep, 2*len(c.entries))
	}
}

// drop forgets id when the cached entry is still o (a relay refused its
// claim token: the sandbox is gone or was never that one).
func (c *ownerCache) drop(id string, o owner) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[id]; ok && e.owner == o {
		delete(c.entries, id)
	}
}

// flight collapses concurrent lookups of one key into one: waiters share
// the leader's answer, so a burst of requests for one unknown id is one
// ask against the budget and one read per node.
type flight struct {
	g singleflight.Group
}

// do runs fn once per key at a time. fn must not depend on any one
// caller's context: it runs to its end however many callers stop
// waiting, and a waiter whose done closes stops waiting.
func (f *flight) do(done <-chan struct{}, key string, fn func() (owner, error)) (owner, error) {
	ch := f.g.DoChan(key, func() (any, error) { return fn() })
	select {
	case r := <-ch:
		o, _ := r.Val.(owner)
		return o, r.Err
	case <-done:
		return owner{}, errCallerGone
	}
}
