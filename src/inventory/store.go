package inventory

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// DefaultResync is how often the store re-applies the freshness rule with
// no inventory event, so a node whose age crosses the window by the
// passage of time alone (the capped newest stamp catching up with a node
// that ran ahead) is dropped or readmitted without waiting for a publish.
const DefaultResync = time.Second

// Source is what the store reads NodeInventory events from; a
// cache.SharedIndexInformer over nodeinventories satisfies it.
type Source interface {
	AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error)
}

// Config configures a Store.
type Config struct {
	// Source delivers NodeInventory objects (typed or unstructured). Required.
	Source Source
	// StaleAfter is the freshness window; default DefaultStaleAfter.
	StaleAfter time.Duration
	// Resync is the time-only re-evaluation period; default DefaultResync.
	Resync time.Duration
	// Clock is the process clock; default the real one.
	Clock clock.WithTicker
	// Logger gets the objects the store cannot read; nil discards.
	Logger *slog.Logger
}

// Store is the indexed fresh view of the fleet's inventories. Every method
// is safe for concurrent use; lookups are map reads, never scans.
type Store struct {
	cfg    Config
	reg    cache.ResourceEventHandlerRegistration
	notify *notifier

	mu sync.RWMutex
	// nodes holds every inventory seen, fresh or not, by object name.
	nodes map[string]*nodeState
	// The indexes hold the entries of fresh nodes only.
	byRef map[string][]*Entry            // "<ns>/<name>" → entries
	byNS  map[string]map[string]struct{} // ns → set of ref keys
	byID  map[string][]*Entry            // sandboxd spelling → entries
	// lists caches each namespace's sorted List answer ("" for all); a
	// change to a namespace drops its answer and the all-namespace one.
	lists map[string][]Entry
}

type nodeState struct {
	name      string
	address   string
	published time.Time
	pools     []Pool
	entries   map[string]*Entry // by published entry name
	fresh     bool
}

// New builds a store and registers it with cfg.Source. Call Run to deliver
// change notifications and apply the freshness rule over time; lookups
// work without it.
func New(cfg Config) (*Store, error) {
	if cfg.Source == nil {
		return nil, errors.New("inventory: Source is required")
	}
	if cfg.StaleAfter == 0 {
		cfg.StaleAfter = DefaultStaleAfter
	}
	if cfg.StaleAfter < 0 {
		return nil, fmt.Errorf("inventory: negative StaleAfter %v", cfg.StaleAfter)
	}
	if cfg.Resync <= 0 {
		cfg.Resync = DefaultResync
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Store{
		cfg:    cfg,
		notify: newNotifier(),
		nodes:  map[string]*nodeState{},
		byRef:  map[string][]*Entry{},
		byNS:   map[string]map[string]struct{}{},
		byID:   map[string][]*Entry{},
		lists:  map[string][]Entry{},
	}
	reg, err := cfg.Source.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.upsert(obj) },
		UpdateFunc: func(_, obj any) { s.upsert(obj) },
		DeleteFunc: s.remove,
	})
	if err != nil {
		return nil, fmt.Errorf("inventory: register event handler: %w", err)
	}
	s.reg = reg
	return s, nil
}

// HasSynced reports whether the store has seen the informer's initial list.
func (s *Store) HasSynced() bool { return s.reg.HasSynced() }

// Subscribe calls fn for every change of the fresh view, in order, from a
// single goroutine that holds no store lock (fn may read the store, and
// sees a state at least as new as the change). fn must not block. Changes
// that happened before Subscribe are not replayed; a subscriber that needs
// them reads the store after subscribing. The returned func unsubscribes.
func (s *Store) Subscribe(fn func(Change)) (unsubscribe func()) {
	return s.notify.subscribe(fn)
}

// Run delivers notifications and re-applies the freshness rule every
// Resync until ctx ends.
func (s *Store) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { s.notify.run(ctx) })
	t := s.cfg.Clock.NewTicker(s.cfg.Resync)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			wg.Wait()
			return
		case <-t.C():
			s.mu.Lock()
			s.notify.enqueue(s.refreshLocked(""))
			s.mu.Unlock()
		}
	}
}

// Nodes returns the fresh nodes sorted by name.
func (s *Store) Nodes() []Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		if n.fresh {
			out = append(out, n.view())
		}
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Known returns every node the store holds an inventory of, fresh or
// not (Node.Fresh tells), sorted by name: for the operators' count of
// stale nodes, which no other read shows.
func (s *Store) Known() []Node {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]Node, 0, len(s.nodes))
	for _, n := range s.nodes {
		out = append(out, n.view())
	}
	slices.SortFunc(out, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// Node returns one fresh node.
func (s *Store) Node(name string) (Node, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	n := s.nodes[name]
	if n == nil || !n.fresh {
		return Node{}, false
	}
	return n.view(), true
}

// ByClaimRef returns the sandbox claimed as namespace/name on a fresh node.
// name is the object name; an underscore spelling is accepted too.
func (s *Store) ByClaimRef(namespace, name string) (Entry, bool) {
	key := sandbox.ClaimRef{Namespace: namespace, Name: strings.ReplaceAll(name, "_", "-")}.String()
	s.mu.RLock()
	defer s.mu.RUnlock()
	if e := pick(s.byRef[key]); e != nil {
		return *e, true
	}
	return Entry{}, false
}

// AllByClaimRef returns every sandbox claimed as namespace/name on a fresh
// node, ByClaimRef's first. There is more than one only for a moment: a
// claim a node granted after its caller gave up on it (released by the
// fleet core's re-check once the node answers), or an old claim under a
// reused name whose release its node has not published yet. A delete of
// the name must release them all.
func (s *Store) AllByClaimRef(namespace, name string) []Entry {
	key := sandbox.ClaimRef{Namespace: namespace, Name: strings.ReplaceAll(name, "_", "-")}.String()
	s.mu.RLock()
	defer s.mu.RUnlock()
	list := s.byRef[key]
	first := pick(list)
	if first == nil {
		return nil
	}
	out := make([]Entry, 0, len(list))
	out = append(out, *first)
	for _, e := range list {
		if e != first {
			out = append(out, *e)
		}
	}
	return out
}

// ByID returns the sandbox with sandboxd id id, given in either spelling,
// on a fresh node. A non-empty namespace keeps only a sandbox claimed in
// it; "" matches every sandbox, including one claimed without a reference.
func (s *Store) ByID(id, namespace string) (Entry, bool) {
	canon, ok := sandbox.CanonicalID(id)
	if !ok {
		return Entry{}, false
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	cands := s.byID[canon]
	if namespace != "" {
		var in []*Entry
		for _, e := range cands {
			if e.Namespace == namespace {
				in = append(in, e)
			}
		}
		cands = in
	}
	if e := pick(cands); e != nil {
		return *e, true
	}
	return Entry{}, false
}

// List returns the sandboxes of namespace ("" for every namespace) on
// fresh nodes, sorted by namespace and name. Entries without a claim
// reference belong to no namespace and are never listed. The slice is the
// caller's.
func (s *Store) List(namespace string) []Entry {
	return slices.Clone(s.Sorted(namespace))
}

// Sorted is List without the copy: the slice is shared with every other
// caller and with the store's cache, and must not be modified. A list of
// 50 000 sandboxes is some 20 MB of entries, and readers that only walk it
// (a page of a paged list, a watch's initial events) should not pay that
// per request. The store never writes into a slice it has handed out: a
// change drops the cached answer and the next call builds a new one.
func (s *Store) Sorted(namespace string) []Entry {
	s.mu.RLock()
	cached, ok := s.lists[namespace]
	s.mu.RUnlock()
	if ok {
		return cached
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if cached, ok := s.lists[namespace]; ok {
		return cached
	}
	var out []Entry
	if namespace == "" {
		out = make([]Entry, 0, len(s.byRef))
		for _, list := range s.byRef {
			out = append(out, *pick(list))
		}
	} else {
		keys := s.byNS[namespace]
		out = make([]Entry, 0, len(keys))
		for key := range keys {
			out = append(out, *pick(s.byRef[key]))
		}
	}
	slices.SortFunc(out, CompareKeys)
	s.lists[namespace] = out
	return out
}

// CompareKeys orders entries by namespace, then object name: the order of
// every list. It compares the two parts, not the joined key: "a-b/x" sorts
// after "a/x" here, as namespace "a" sorts before "a-b", though '-' sorts
// before '/'.
func CompareKeys(a, b Entry) int {
	if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
		return c
	}
	return strings.Compare(a.ObjectName, b.ObjectName)
}

// pick chooses among entries that share a key (a claim reference seen on
// two nodes, which only a misbehaving publisher produces): the most
// recently claimed, then the lowest node name, so every replica agrees.
func pick(list []*Entry) *Entry {
	var best *Entry
	for _, e := range list {
		if best == nil || e.ClaimedAt.After(best.ClaimedAt) ||
			(e.ClaimedAt.Equal(best.ClaimedAt) && e.Node < best.Node) {
			best = e
		}
	}
	return best
}

func (n *nodeState) view() Node {
	return Node{
		Name: n.name, Address: n.address, PublishedAt: n.published,
		Pools: slices.Clone(n.pools), Entries: len(n.entries), Fresh: n.fresh,
	}
}

// upsert applies an added or updated inventory.
func (s *Store) upsert(obj any) {
	inv, err := toInventory(obj)
	if err != nil {
		s.cfg.Logger.Error("ignoring an unreadable NodeInventory", "err", err)
		return
	}
	next := newNodeState(inv)
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.nodes[next.name]
	if prev != nil {
		// An unchanged entry keeps its pointer, so the indexes need no
		// churn on a routine republish.
		for name, e := range next.entries {
			if old := prev.entries[name]; old != nil && old.Same(e) {
				next.entries[name] = old
			}
		}
	}
	s.nodes[next.name] = next
	s.notify.enqueue(s.refreshLocked(next.name, prevOf(prev)...))
}

// remove applies a deleted inventory.
func (s *Store) remove(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	inv, err := toInventory(obj)
	if err != nil {
		s.cfg.Logger.Error("ignoring an unreadable deleted NodeInventory", "err", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	prev := s.nodes[inv.Name]
	if prev == nil {
		return
	}
	delete(s.nodes, inv.Name)
	s.notify.enqueue(s.refreshLocked(inv.Name, prev))
}

func prevOf(n *nodeState) []*nodeState {
	if n == nil {
		return nil
	}
	return []*nodeState{n}
}

// refreshLocked re-applies the freshness rule to every node and brings the
// indexes in line, returning the visible changes. changed names a node
// whose state was just replaced or removed, and prev carries its previous
// state (none for a new node).
func (s *Store) refreshLocked(changed string, prev ...*nodeState) []Change {
	stamps := make(map[string]time.Time, len(s.nodes))
	for name, n := range s.nodes {
		stamps[name] = n.published
	}
	fresh := freshNodes(stamps, s.cfg.Clock.Now(), s.cfg.StaleAfter)

	var changes []Change
	if changed != "" {
		var before map[string]*Entry
		if len(prev) > 0 && prev[0].fresh {
			before = prev[0].entries
		}
		var after map[string]*Entry
		if n := s.nodes[changed]; n != nil {
			n.fresh = fresh[changed]
			if n.fresh {
				after = n.entries
			}
		}
		changes = s.diffLocked(before, after, changes)
	}
	for name, n := range s.nodes {
		if name == changed || n.fresh == fresh[name] {
			continue
		}
		n.fresh = fresh[name]
		if n.fresh {
			changes = s.diffLocked(nil, n.entries, changes)
		} else {
			changes = s.diffLocked(n.entries, nil, changes)
		}
	}
	return changes
}

// diffLocked moves the indexes from one node's visible entries to another
// set of the same node's and appends the changes.
func (s *Store) diffLocked(before, after map[string]*Entry, changes []Change) []Change {
	for name, old := range before {
		cur := after[name]
		switch {
		case cur == nil:
			s.unindexLocked(old)
			changes = append(changes, Change{Type: Deleted, Entry: *old})
		case cur != old:
			s.unindexLocked(old)
			s.indexLocked(cur)
			changes = append(changes, Change{Type: Modified, Entry: *cur, Old: *old})
		}
	}
	for name, cur := range after {
		if before[name] == nil {
			s.indexLocked(cur)
			changes = append(changes, Change{Type: Added, Entry: *cur})
		}
	}
	return changes
}

func (s *Store) indexLocked(e *Entry) {
	if e.ID != "" {
		s.byID[e.ID] = append(s.byID[e.ID], e)
	}
	if key := e.Key(); key != "" {
		s.byRef[key] = append(s.byRef[key], e)
		set := s.byNS[e.Namespace]
		if set == nil {
			set = map[string]struct{}{}
			s.byNS[e.Namespace] = set
		}
		set[key] = struct{}{}
		s.invalidateLocked(e.Namespace)
	}
}

func (s *Store) unindexLocked(e *Entry) {
	if e.ID != "" {
		if list := without(s.byID[e.ID], e); len(list) > 0 {
			s.byID[e.ID] = list
		} else {
			delete(s.byID, e.ID)
		}
	}
	if key := e.Key(); key != "" {
		if list := without(s.byRef[key], e); len(list) > 0 {
			s.byRef[key] = list
		} else {
			delete(s.byRef, key)
			if set := s.byNS[e.Namespace]; set != nil {
				delete(set, key)
				if len(set) == 0 {
					delete(s.byNS, e.Namespace)
				}
			}
		}
		s.invalidateLocked(e.Namespace)
	}
}

func (s *Store) invalidateLocked(namespace string) {
	delete(s.lists, namespace)
	delete(s.lists, "")
}

// without returns list minus e, reusing list's array only when e is absent.
func without(list []*Entry, e *Entry) []*Entry {
	i := slices.Index(list, e)
	if i < 0 {
		return list
	}
	out := make([]*Entry, 0, len(list)-1)
	out = append(out, list[:i]...)
	return append(out, list[i+1:]...)
}

func newNodeState(inv *v1beta1.NodeInventory) *nodeState {
	node := inv.Node
	if node == "" {
		node = inv.Name
	}
	n := &nodeState{name: inv.Name, address: inv.Address, entries: make(map[string]*Entry, len(inv.Entries))}
	if n.name == "" {
		n.name = node
	}
	if inv.PublishedAt != nil {
		n.published = inv.PublishedAt.Time
	}
	for _, p := range inv.Pools {
		n.pools = append(n.pools, Pool{Template: p.Template, Net: p.Net, Size: p.Size, Warm: p.Warm, Target: p.Target})
	}
	for i := range inv.Entries {
		e := newEntry(node, inv.Address, &inv.Entries[i])
		n.entries[e.Name] = e
	}
	return n
}

func toInventory(obj any) (*v1beta1.NodeInventory, error) {
	switch o := obj.(type) {
	case *v1beta1.NodeInventory:
		return o, nil
	case *unstructured.Unstructured:
		var inv v1beta1.NodeInventory
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &inv); err != nil {
			return nil, fmt.Errorf("inventory: convert %s: %w", o.GetName(), err)
		}
		return &inv, nil
	default:
		return nil, fmt.Errorf("inventory: unexpected object %T", obj)
	}
}
