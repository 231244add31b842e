package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// tracker watches a path's requests and records, per name, when each was
// first seen Ready and when it was deleted: the times a create and a
// delete are measured to.
type tracker struct {
	mu      sync.Mutex
	ready   map[string]time.Time
	gone    map[string]time.Time
	changed chan struct{} // closed and replaced on every record
	cancel  context.CancelFunc
	done    chan struct{}
}

func startTracker(ctx context.Context, client dynamic.ResourceInterface) (*tracker, error) {
	list, err := client.List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	t := &tracker{ready: map[string]time.Time{}, gone: map[string]time.Time{}, changed: make(chan struct{}), cancel: cancel, done: make(chan struct{})}
	go t.loop(ctx, client, list.GetResourceVersion())
	return t, nil
}

// loop follows the watch, reopening it from the last version it saw when
// the server closes it.
func (t *tracker) loop(ctx context.Context, client dynamic.ResourceInterface, rv string) {
	defer close(t.done)
	for ctx.Err() == nil {
		w, err := client.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			rv = u.GetResourceVersion()
			switch ev.Type {
			case watch.Added, watch.Modified:
				if readyCondition(u) {
					t.record(t.ready, u.GetName())
				}
			case watch.Deleted:
				t.record(t.gone, u.GetName())
			}
		}
		w.Stop()
	}
}

func (t *tracker) record(m map[string]time.Time, name string) {
	at := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, seen := m[name]; !seen {
		m[name] = at
		close(t.changed)
		t.changed = make(chan struct{})
	}
}

// readyCondition is the Ready condition being True: a SandboxClaim whose
// Sandbox is ready, a Sandbox whose machine (or Pod) runs.
func readyCondition(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// waitReady waits until every name has been seen Ready and returns when
// each was.
func (t *tracker) waitReady(ctx context.Context, names []string) (map[string]time.Time, error) {
	return t.wait(ctx, t.ready, names, "Ready")
}

// waitGone waits until every name has been seen deleted.
func (t *tracker) waitGone(ctx context.Context, names []string) (map[string]time.Time, error) {
	return t.wait(ctx, t.gone, names, "deleted")
}

func (t *tracker) wait(ctx context.Context, m map[string]time.Time, names []string, what string) (map[string]time.Time, error) {
	for {
		t.mu.Lock()
		out := map[string]time.Time{}
		for _, n := range names {
			if at, ok := m[n]; ok {
				out[n] = at
			}
		}
		changed := t.changed
		t.mu.Unlock()
		if len(out) == len(names) {
			return out, nil
		}
		select {
		case <-ctx.Done():
			return out, fmt.Errorf("%d of %d %s: %w", len(out), len(names), what, context.Cause(ctx))
		case <-changed:
		}
	}
}

func (t *tracker) stop() {
	t.cancel()
	<-t.done
}
