package inventory

import (
	"context"
	"sync"
)

// ChangeType says how an entry changed.
type ChangeType string

const (
	// Added: the entry became visible (a new claim, or its node turned fresh).
	Added ChangeType = "ADDED"
	// Modified: a visible entry changed (phase, deadline, address, …).
	Modified ChangeType = "MODIFIED"
	// Deleted: the entry is no longer visible (released, reaped, or its node
	// turned stale or its inventory was deleted).
	Deleted ChangeType = "DELETED"
)

// Change is one entry's change in the store's fresh view.
type Change struct {
	Type ChangeType
	// Entry is the entry after the change, or its last state for Deleted.
	Entry Entry
	// Old is the entry before a Modified change.
	Old Entry
}

// notifier hands changes to subscribers in order, from one goroutine and
// outside the store's locks, so a subscriber may read the store.
type notifier struct {
	mu     sync.Mutex
	subs   map[int]func(Change)
	nextID int
	queue  []Change
	wake   chan struct{}
}

func newNotifier() *notifier {
	return &notifier{subs: map[int]func(Change){}, wake: make(chan struct{}, 1)}
}

func (n *notifier) subscribe(fn func(Change)) func() {
	n.mu.Lock()
	defer n.mu.Unlock()
	id := n.nextID
	n.nextID++
	n.subs[id] = fn
	return func() {
		n.mu.Lock()
		delete(n.subs, id)
		n.mu.Unlock()
	}
}

// enqueue is called under the store's write lock, which orders the changes.
func (n *notifier) enqueue(changes []Change) {
	if len(changes) == 0 {
		return
	}
	n.mu.Lock()
	if len(n.subs) > 0 {
		n.queue = append(n.queue, changes...)
	}
	n.mu.Unlock()
	select {
	case n.wake <- struct{}{}:
	default:
	}
}

// run delivers queued changes until ctx ends.
func (n *notifier) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.wake:
		}
		for {
			n.mu.Lock()
			batch := n.queue
			n.queue = nil
			subs := make([]func(Change), 0, len(n.subs))
			for _, fn := range n.subs {
				subs = append(subs, fn)
			}
			n.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, c := range batch {
				for _, fn := range subs {
					fn(c)
				}
			}
		}
	}
}
