package e2b

import (
	"container/heap"
	"maps"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// record is what a create recorded that the fleet's view cannot tell: e2b
// metadata, the alias the create named, the template id as the caller
// spelled it, whether it asked for internet access, auto-pause, and an
// anonymous caller's source. Its truth is the sandbox's claim labels on
// its node (labels.go); the tracker only caches it, so losing this process
// loses nothing.
type record struct {
	namespace string
	// source is the address of the anonymous caller that created the
	// sandbox (empty for a key's): its live-sandbox cap counts by it.
	source     string
	templateID string
	alias      string
	metadata   map[string]string
	internet   *bool
	// autoPause is e2b's onTimeout "pause": see autoPauser.
	autoPause bool
	// autoResume lets data-plane traffic wake the sandbox once paused
	// (sandbox.LabelAutoResume).
	autoResume bool
	deadline   time.Time
	index      int // in the expiry heap
	id         string
}

// tracker caches records by canonical sandbox id, bounded: a record goes
// when its sandbox is killed, when its deadline passes, or, past max, the
// one closest to its deadline goes first.
type tracker struct {
	max   int
	clock clock.PassiveClock

	mu    sync.Mutex
	byID  map[string]*record
	order expiryHeap
}

func newTracker(max int, clk clock.PassiveClock) *tracker {
	return &tracker{max: max, clock: clk, byID: map[string]*record{}}
}

// put remembers r under id, replacing any earlier record.
func (t *tracker) put(id string, r record) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pruneLocked()
	if old := t.byID[id]; old != nil {
		heap.Remove(&t.order, old.index)
	}
	r.id = id
	r.metadata = maps.Clone(r.metadata)
	rec := &r
	t.byID[id] = rec
	heap.Push(&t.order, rec)
	for len(t.byID) > t.max {
		oldest := heap.Pop(&t.order).(*record)
		delete(t.byID, oldest.id)
	}
}

// get returns a copy of id's record if it is known, in namespace, and its
// deadline has not passed.
func (t *tracker) get(namespace, id string) (record, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	r := t.byID[id]
	if r == nil || r.namespace != namespace || t.clock.Now().After(r.deadline) {
		return record{}, false
	}
	out := *r
	out.metadata = maps.Clone(r.metadata)
	return out, true
}

// extend moves id's expiry to deadline (a renew).
func (t *tracker) extend(id string, deadline time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byID[id]; r != nil {
		r.deadline = deadline
		heap.Fix(&t.order, r.index)
	}
}

// drop forgets id (a kill).
func (t *tracker) drop(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if r := t.byID[id]; r != nil {
		heap.Remove(&t.order, r.index)
		delete(t.byID, id)
	}
}

func (t *tracker) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.byID)
}

// pruneLocked drops every record whose deadline has passed.
func (t *tracker) pruneLocked() {
	now := t.clock.Now()
	for len(t.order) > 0 && now.After(t.order[0].deadline) {
		r := heap.Pop(&t.order).(*record)
		delete(t.byID, r.id)
	}
}

// expiryHeap orders records by deadline, soonest first.
type expiryHeap []*record

func (h expiryHeap) Len() int           { return len(h) }
func (h expiryHeap) Less(i, j int) bool { return h[i].deadline.Before(h[j].deadline) }
func (h expiryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *expiryHeap) Push(x any) {
	r := x.(*record)
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
