package backend

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
)

// history is a ring of the most recent events, for resuming watches.
type history struct {
	buf   []registry.Event
	start int // index of the oldest event
	n     int
}

func newHistory(size int) *history { return &history{buf: make([]registry.Event, size)} }

func (h *history) add(ev registry.Event) {
	if h.n < len(h.buf) {
		h.buf[(h.start+h.n)%len(h.buf)] = ev
		h.n++
		return
	}
	h.buf[h.start] = ev
	h.start = (h.start + 1) % len(h.buf)
}

// since returns the events after rev in namespace ("" all), and false when
// some event after rev is no longer held.
func (h *history) since(rev registry.Revision, namespace string) ([]registry.Event, bool) {
	if h.n > 0 && h.buf[h.start].Revision > rev+1 {
		return nil, false
	}
	var out []registry.Event
	for i := range h.n {
		ev := h.buf[(h.start+i)%len(h.buf)]
		if ev.Revision > rev && matches(ev, namespace) {
			out = append(out, ev)
		}
	}
	return out, true
}

func matches(ev registry.Event, namespace string) bool {
	return namespace == "" || ev.Sandbox.Namespace == namespace
}

// watcher is one Watch call. The service pushes events into in without
// blocking; a watcher whose buffer is full is dropped (stop closes) and its
// client re-watches, as a slow Kubernetes watcher is.
type watcher struct {
	namespace string
	in        chan registry.Event
	stop      chan struct{}
	stopOnce  sync.Once
}

func (w *watcher) drop() { w.stopOnce.Do(func() { close(w.stop) }) }

// publishLocked records an event and hands it to every matching watcher.
func (s *Service) publishLocked(ev registry.Event) {
	s.history.add(ev)
	for w := range s.watchers {
		if !matches(ev, w.namespace) {
			continue
		}
		select {
		case w.in <- ev:
		default:
			delete(s.watchers, w)
			w.drop()
		}
	}
}

// Watch implements the registry's Backend.
func (s *Service) Watch(ctx context.Context, namespace string, from registry.Revision) (<-chan registry.Event, error) {
	w := &watcher{namespace: namespace, in: make(chan registry.Event, s.cfg.WatchBuffer), stop: make(chan struct{})}
	var first []registry.Event
	s.mu.Lock()
	if from != 0 {
		if from > s.rev {
			s.mu.Unlock()
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("revision %d is not known to this server; list again", from))
		}
		replay, ok := s.history.since(from, namespace)
		if !ok {
			s.mu.Unlock()
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("revision %d is too old; list again", from))
		}
		first = replay
	}
	s.watchers[w] = struct{}{}
	s.mu.Unlock()

	// skip drops live events the initial list already reflects.
	var skip registry.Revision
	if from == 0 {
		// Registered first, listed second: a change in between is in the
		// list or an event after it, never in neither. The list is read at
		// revision rev or later, so live events up to rev are in it.
		res := s.page(namespace, registry.ListOptions{})
		items, rev := res.Items, res.Revision
		skip = rev
		first = make([]registry.Event, len(items))
		for i := range items {
			first[i] = registry.Event{Type: registry.Added, Sandbox: &items[i], Revision: rev}
		}
	}

	out := make(chan registry.Event)
	s.bg.Go(func() {
		defer close(out)
		defer func() {
			s.mu.Lock()
			delete(s.watchers, w)
			s.mu.Unlock()
		}()
		send := func(ev registry.Event, shared bool) bool {
			if shared {
				// Events in history are shared between watchers; each
				// gets its own copy to encode or keep.
				ev.Sandbox = ev.Sandbox.DeepCopy()
			}
			select {
			case out <- ev:
				return true
			case <-ctx.Done():
			case <-w.stop:
			case <-s.stopped:
			}
			return false
		}
		for _, ev := range first {
			if !send(ev, from != 0) {
				return
			}
		}
		first = nil
		for {
			select {
			case ev := <-w.in:
				if ev.Revision <= skip {
					continue
				}
				if !send(ev, true) {
					return
				}
			case <-ctx.Done():
				return
			case <-w.stop:
				return
			case <-s.stopped:
				return
			}
		}
	})
	return out, nil
}
