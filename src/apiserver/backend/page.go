package backend

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// ListPage returns one page of the sandboxes of namespace ("" for all).
func (s *Service) ListPage(_ context.Context, namespace string, opts registry.ListOptions) (registry.ListResult, error) {
	if opts.Limit < 0 {
		return registry.ListResult{}, errors.New("sandboxes: negative list limit")
	}
	return s.page(namespace, opts), nil
}

// page is ListPage for valid options.
func (s *Service) page(namespace string, opts registry.ListOptions) registry.ListResult {
	l := s.read(namespace)
	res := registry.ListResult{Revision: l.rev}
	size := len(l.entries) + len(l.overlays)
	if opts.Limit > 0 {
		size = min(size, opts.Limit)
	}
	res.Items = make([]agentsv1beta1.Sandbox, 0, size)
	s.mu.Lock()
	next, remaining := l.walk(opts.After, func(v *view) bool {
		if opts.Limit > 0 && len(res.Items) == opts.Limit {
			return false
		}
		res.Items = append(res.Items, agentsv1beta1.Sandbox{})
		item := &res.Items[len(res.Items)-1]
		fillSandbox(item, v, min(s.revLocked(v.entry.Key(), v), l.rev))
		if opts.Match != nil && !opts.Match(item) {
			res.Items = res.Items[:len(res.Items)-1]
		}
		return true
	})
	s.mu.Unlock()
	if next {
		last := &res.Items[len(res.Items)-1]
		res.Next = sandbox.ClaimRef{Namespace: last.Namespace, Name: last.Name}
		res.Remaining = int64(remaining)
		if opts.Match != nil {
			res.Remaining = -1
		}
	}
	return res
}

// listing is a read of what a namespace shows: the inventory's sorted
// entries (shared with the store, never modified) and this replica's
// overlays in it, sorted the same way, at revision rev.
type listing struct {
	entries  []inventory.Entry
	overlays []*overlay
	rev      registry.Revision
	now      time.Time
}

// read takes a listing of namespace. The revision is read first: anything
// that changes while the list is built is also an event after it.
func (s *Service) read(namespace string) listing {
	s.mu.Lock()
	l := listing{rev: s.rev, now: s.cfg.Clock.Now()}
	for _, ov := range s.overlays {
		if namespace == "" || ov.entry.Namespace == namespace {
			l.overlays = append(l.overlays, ov)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(l.overlays, func(a, b *overlay) int { return inventory.CompareKeys(a.entry, b.entry) })
	l.entries = s.inv.Sorted(namespace)
	return l
}

// compareRef orders an entry against a claim reference as CompareKeys
// orders entries.
func compareRef(e *inventory.Entry, ref sandbox.ClaimRef) int {
	return cmp.Or(strings.Compare(e.Namespace, ref.Namespace), strings.Compare(e.ObjectName, ref.Name))
}

// walk calls fn, in order, with every sandbox the listing shows after the
// reference after (all of them for the zero reference), until fn answers
// false. It reports whether it stopped with sandboxes left, and about how
// many: the entries and overlays not reached, which double-counts a
// sandbox that has both.
func (l *listing) walk(after sandbox.ClaimRef, fn func(*view) bool) (stopped bool, remaining int) {
	i, j := 0, 0
	if after != (sandbox.ClaimRef{}) {
		i = sandbox.ResumeAfter(l.entries, after, func(e inventory.Entry, ref sandbox.ClaimRef) int { return compareRef(&e, ref) })
		j = sandbox.ResumeAfter(l.overlays, after, func(ov *overlay, ref sandbox.ClaimRef) int { return compareRef(&ov.entry, ref) })
	}
	for i < len(l.entries) || j < len(l.overlays) {
		var inv *inventory.Entry
		var ov *overlay
		switch {
		case j == len(l.overlays):
			inv = &l.entries[i]
		case i == len(l.entries):
			ov = l.overlays[j]
		default:
			switch c := inventory.CompareKeys(l.entries[i], l.overlays[j].entry); {
			case c < 0:
				inv = &l.entries[i]
			case c > 0:
				ov = l.overlays[j]
			default:
				inv, ov = &l.entries[i], l.overlays[j]
			}
		}
		var cur view
		visible := true
		if ov == nil {
			cur = view{entry: *inv}
		} else {
			cur, visible, _ = resolve(inv, ov, l.now)
		}
		if visible && !fn(&cur) {
			return true, len(l.entries) - i + len(l.overlays) - j
		}
		if inv != nil {
			i++
		}
		if ov != nil {
			j++
		}
	}
	return false, 0
}
