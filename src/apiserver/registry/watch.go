package registry

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"
)

// watchBuffer decouples the backend's channel from the HTTP writer a little;
// a client slower than that backs up into the backend, which drops it.
const watchBuffer = 64

// Watch streams sandbox changes as Kubernetes watch events.
//
// resourceVersion "" or "0" starts with an ADDED event per existing sandbox;
// any other value resumes after that backend revision, and a revision the
// backend has forgotten answers 410 Expired so the client relists.
// sendInitialEvents=true (the watch-list protocol informers use, and what
// the handler defaults a watch from "" or "0" to) lists the sandboxes as
// ADDED events, then, when the client allows bookmarks, sends the
// initial-events-end bookmark at the listed revision, then follows changes
// after it.
//
// Every event carries the revision of that change as the object's
// resourceVersion. Selectors apply to each event's object; a sandbox whose
// labels stop matching does not produce a DELETED event (the backend's
// labels describe the claim and do not change over its life).
func (r *REST) Watch(ctx context.Context, options *metainternalversion.ListOptions) (watch.Interface, error) {
	ns := namespaceOf(ctx)
	match, err := newMatcher(options)
	if err != nil {
		return nil, err
	}
	initial := options != nil && options.SendInitialEvents != nil && *options.SendInitialEvents
	var from Revision
	if options != nil && !initial {
		if from, err = parseResourceVersion(options.ResourceVersion); err != nil {
			return nil, err
		}
	}

	wctx, cancel := context.WithCancel(ctx)
	w := &sandboxWatch{cancel: cancel, result: make(chan watch.Event, watchBuffer)}

	var listed []agentsv1beta1.Sandbox
	if initial {
		page, err := r.backend.ListPage(wctx, ns, ListOptions{})
		if err != nil {
			cancel()
			return nil, err
		}
		listed, from = page.Items, page.Revision
	}
	events, err := r.backend.Watch(wctx, ns, from)
	if err != nil {
		cancel()
		return nil, err
	}
	bookmarks := options != nil && options.AllowWatchBookmarks
	go w.run(wctx, events, match, listed, initial, bookmarks, from)
	return w, nil
}

func parseResourceVersion(rv string) (Revision, error) {
	if rv == "" || rv == "0" {
		return 0, nil
	}
	n, err := strconv.ParseUint(rv, 10, 64)
	if err != nil {
		return 0, errors.NewBadRequest(fmt.Sprintf("invalid resourceVersion %q: sandboxes use decimal revisions", rv))
	}
	return Revision(n), nil
}

// sandboxWatch adapts a backend event channel to watch.Interface.
type sandboxWatch struct {
	cancel   context.CancelFunc
	stopOnce sync.Once
	result   chan watch.Event
}

// Stop ends the watch; the result channel closes once the relay has exited.
func (w *sandboxWatch) Stop() { w.stopOnce.Do(w.cancel) }

// ResultChan is the event stream.
func (w *sandboxWatch) ResultChan() <-chan watch.Event { return w.result }

func (w *sandboxWatch) run(ctx context.Context, events <-chan Event, match matcher, listed []agentsv1beta1.Sandbox, initial, bookmarks bool, listedAt Revision) {
	defer close(w.result)
	defer w.Stop()

	if initial {
		for i := range listed {
			if !match(&listed[i]) {
				continue
			}
			sb := listed[i].DeepCopy()
			if sb.ResourceVersion == "" {
				sb.ResourceVersion = revisionString(listedAt)
			}
			if !w.send(ctx, watch.Event{Type: watch.Added, Object: sb}) {
				return
			}
		}
		// The end-of-initial-events bookmark goes only to a client that
		// allows bookmarks: the handler defaults sendInitialEvents on for a
		// plain watch from "" or "0", and such a client expects none.
		if bookmarks {
			bookmark := &agentsv1beta1.Sandbox{}
			bookmark.ResourceVersion = revisionString(listedAt)
			bookmark.Annotations = map[string]string{metav1.InitialEventsAnnotationKey: "true"}
			if !w.send(ctx, watch.Event{Type: watch.Bookmark, Object: bookmark}) {
				return
			}
		}
	}

	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				// The backend dropped this watcher (slow, or shutting
				// down): ending the stream makes the client re-watch.
				return
			}
			out, ok := toWatchEvent(ev)
			if !ok || !match(out.Object.(*agentsv1beta1.Sandbox)) {
				continue
			}
			if !w.send(ctx, out) {
				return
			}
		}
	}
}

func (w *sandboxWatch) send(ctx context.Context, ev watch.Event) bool {
	select {
	case w.result <- ev:
		return true
	case <-ctx.Done():
		return false
	}
}

func toWatchEvent(ev Event) (watch.Event, bool) {
	if ev.Sandbox == nil {
		return watch.Event{}, false
	}
	var t watch.EventType
	switch ev.Type {
	case Added:
		t = watch.Added
	case Modified:
		t = watch.Modified
	case Deleted:
		t = watch.Deleted
	default:
		return watch.Event{}, false
	}
	sb := ev.Sandbox.DeepCopy()
	// A client resumes from the last resourceVersion it saw, so each event
	// must carry the revision of the change it reports.
	sb.ResourceVersion = revisionString(ev.Revision)
	return watch.Event{Type: t, Object: sb}, true
}

func revisionString(rev Revision) string { return strconv.FormatUint(uint64(rev), 10) }
