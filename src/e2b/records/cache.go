package records

import (
	"container/heap"
	"maps"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Record is what a create recorded that the fleet's view cannot tell: e2b
// metadata, the alias the create named, the template id as the caller
// spelled it, whether it asked for internet access, auto-pause, and an
// anonymous caller's source. Its truth is the sandbox's claim labels on
// its node (Labels); the cache only holds it, so losing this process
// loses nothing.
type Record struct {
	Namespace string
	// Source is the address of the anonymous caller that created the
	// sandbox (empty for a key's): its live-sandbox cap counts by it.
	Source     string
	TemplateID string
	Alias      string
	Metadata   map[string]string
	Internet   *bool
	// AutoPause is e2b's onTimeout "pause": the node archives the
	// sandbox at its deadline instead of destroying it.
	AutoPause bool
	// AutoResume lets data-plane traffic wake the sandbox once paused
	// (sandbox.LabelAutoResume).
	AutoResume bool
	Deadline   time.Time
}

// entry is a cached record with its place in the expiry heap.
type entry struct {
	Record
	id    string
	index int // in the expiry heap
}

// cache holds records by canonical sandbox id, bounded: a record goes
// when its sandbox is killed, when its deadline passes, or, past max, the
// one closest to its deadline goes first.
type cache struct {
	max   int
	clock clock.PassiveClock

	mu    sync.Mutex
	byID  map[string]*entry
	order expiryHeap
}

func newCache(max int, clk clock.PassiveClock) *cache {
	return &cache{max: max, clock: clk, byID: map[string]*entry{}}
}

// put remembers r under id, replacing any earlier record.
func (t *cache) put(id string, r Record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked()
	if old := t.byID[id]; old != nil {
		heap.Remove(&t.order, old.index)
	}
	r.Metadata = maps.Clone(r.Metadata)
	e := &entry{Record: r, id: id}
	t.byID[id] = e
	heap.Push(&t.order, e)
	for len(t.byID) > t.max {
		oldest := heap.Pop(&t.order).(*entry)
		delete(t.byID, oldest.id)
	}
}

// get returns a copy of id's record if it is known, in namespace, and its
// deadline has not passed.
func (t *cache) get(namespace, id string) (Record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e := t.byID[id]
	if e == nil || e.Namespace != namespace || t.clock.Now().After(e.Deadline) {
		return Record{}, false
	}
	out := e.Record
	out.Metadata = maps.Clone(e.Metadata)
	return out, true
}

// extend moves id's expiry to deadline (a renew).
func (t *cache) extend(id string, deadline time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byID[id]; r != nil {
		r.Deadline = deadline
		heap.Fix(&t.order, r.index)
	}
}

// drop forgets id (a kill).
func (t *cache) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byID[id]; r != nil {
		heap.Remove(&t.order, r.index)
		delete(t.byID, id)
	}
}

func (t *cache) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// pruneLocked drops every record whose deadline has passed.
func (t *cache) pruneLocked() {
	now := t.clock.Now()
	for len(t.order) > 0 && now.After(t.order[0].Deadline) {
		r := heap.Pop(&t.order).(*entry)
		delete(t.byID, r.id)
	}
}

// expiryHeap orders entries by deadline, soonest first.
type expiryHeap []*entry

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].Deadline.Before(h[j].Deadline) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	r := x.(*entry)
	r.index = len(*h)
	*h = append(*h, r)
}
func (h *expiryHeap) Pop() any {
	old := *h
	n := len(old)
	r := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return r
}
