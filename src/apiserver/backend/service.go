package backend

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/peerwrites"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// Defaults for Config's zero values.
const (
	DefaultNodeTimeout       = 10 * time.Second
	DefaultRecentTTL         = 60 * time.Second
	DefaultRetryAfterSeconds = 5
	DefaultHistory           = 4096
	DefaultWatchBuffer       = 1024
	DefaultMaxRecent         = 10000
	defaultSweep             = time.Second
)

// Inventory is the read side the Service serves from; *inventory.Store
// implements it.
type Inventory interface {
	Nodes() []inventory.Node
	ByClaimRef(namespace, name string) (inventory.Entry, bool)
	// AllByClaimRef is every sandbox under the name, ByClaimRef's first.
	AllByClaimRef(namespace, name string) []inventory.Entry
	ByID(id, namespace string) (inventory.Entry, bool)
	// Sorted is the namespace's sandboxes ("" for all) in CompareKeys
	// order, shared and read-only.
	Sorted(namespace string) []inventory.Entry
	Subscribe(fn func(inventory.Change)) (unsubscribe func())
}

// Config configures a Service.
type Config struct {
	// Inventory is the fleet view. Required.
	Inventory Inventory
	// ClaimObserver, when set, is told how every claim of the fleet core
	// ended, this front's and the e2b surface's that shares the core.
	ClaimObserver fleet.ClaimObserver
	// OperationObserver, when set, is told how every lifecycle operation
	// of the fleet core ended.
	OperationObserver fleet.OperationObserver
	// Token is the fleet sandboxd token (see TokenOptions); empty sends
	// node-local calls without one.
	Token string
	// HTTPClient carries sandboxd calls; default the sandboxd package's
	// shared client.
	HTTPClient *http.Client
	// Clock is the process clock; default the real one.
	Clock clock.WithTicker
	// Rand drives the fleet's node choice; default randomly seeded.
	Rand *rand.Rand
	// Logger receives node failures; default discards. Tokens never
	// appear in it.
	Logger *slog.Logger

	// NodeTimeout bounds each call to one node, within the request's own
	// deadline; default DefaultNodeTimeout.
	NodeTimeout time.Duration
	// RecentTTL is how long a write of this replica is shown over an
	// inventory that does not reflect it yet; default DefaultRecentTTL,
	// two publish intervals.
	RecentTTL time.Duration
	// RetryAfterSeconds is the retry hint of a capacity refusal.
	RetryAfterSeconds int
	// History is how many events a watch can resume across.
	History int
	// WatchBuffer is how many events one watcher may fall behind before it
	// is dropped.
	WatchBuffer int
	// MaxRecent bounds the recent writes kept; past it the one closest to
	// expiry goes first.
	MaxRecent int
	// Names makes a name one sandbox across replicas (see NameHolds); nil
	// for a single replica, which its own in-flight set covers.
	Names NameHolds
	// Peers shares this replica's writes with the other replicas before
	// the write is answered (*peerwrites.Sharer); nil for a single
	// replica. The peers apply them with ApplyPeerWrites.
	Peers PeerWrites
}

// PeerWrites sends a write to the other replicas, returning once they have
// it or its bound passed.
type PeerWrites interface {
	Share(peerwrites.Write)
}

// NameHolds are holds on names that every replica sees; *namehold.Holds
// implements them. Keys are "<namespace>/<name>".
type NameHolds interface {
	// Acquire holds key for a create and keeps it until Settle, Release
	// or Free; namehold.ErrHeld means another replica holds it.
	Acquire(ctx context.Context, key string) error
	// Settle lets the hold lapse: the inventory shows the outcome.
	Settle(key string)
	// Release gives up this replica's hold: its create failed.
	Release(key string)
	// Free removes whoever's hold: the named sandbox was deleted. It
	// returns once every replica would see the name free.
	Free(ctx context.Context, key string) error
}

// Service serves sandboxes from the fleet. Create one with New and Run it.
type Service struct {
	cfg         Config
	inv         Inventory
	fleet       *fleet.Fleet
	lookup      *nodeLookup
	unsubscribe func()
	stopped     chan struct{}
	stopOnce    sync.Once
	bg          sync.WaitGroup // watch feeders

	mu sync.Mutex
	// overlays holds this replica's recent writes by "<ns>/<name>".
	overlays map[string]*overlay
	// released are the ids of sandboxes released here or by a peer, with
	// when they may be forgotten: a peer's write of one that arrives late
	// must not bring it back.
	released map[string]time.Time
	// creating holds the keys of creates in flight on this replica.
	creating map[string]struct{}
	// shown is what watchers were last told about each key.
	shown    map[string]shownView
	rev      registry.Revision
	history  *history
	watchers map[*watcher]struct{}
}

// overlay is a recent write: the state this replica expects the inventory
// to show, or (deleted) that it expects the sandbox with that id gone.
type overlay struct {
	view
	deleted bool
	expires time.Time
	// at is when the write was made, here or on the peer that sent it.
	at time.Time
}

type shownView struct {
	view
	rev registry.Revision
}

// New builds a Service and subscribes it to the inventory.
func New(cfg Config) (*Service, error) {
	if cfg.Inventory == nil {
		return nil, errors.New("sandboxes: Inventory is required")
	}
	cfg.Clock = cmp.Or[clock.WithTicker](cfg.Clock, clock.RealClock{})
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.NodeTimeout = cmp.Or(cfg.NodeTimeout, DefaultNodeTimeout)
	cfg.RecentTTL = cmp.Or(cfg.RecentTTL, DefaultRecentTTL)
	cfg.RetryAfterSeconds = cmp.Or(cfg.RetryAfterSeconds, DefaultRetryAfterSeconds)
	cfg.History = cmp.Or(cfg.History, DefaultHistory)
	cfg.WatchBuffer = cmp.Or(cfg.WatchBuffer, DefaultWatchBuffer)
	cfg.MaxRecent = cmp.Or(cfg.MaxRecent, DefaultMaxRecent)
	if cfg.NodeTimeout < 0 || cfg.RecentTTL < 0 || cfg.RetryAfterSeconds < 0 ||
		cfg.History < 0 || cfg.WatchBuffer < 0 || cfg.MaxRecent < 0 {
		return nil, errors.New("sandboxes: negative Config value")
	}
	s := &Service{
		cfg:      cfg,
		inv:      cfg.Inventory,
		stopped:  make(chan struct{}),
		overlays: map[string]*overlay{},
		released: map[string]time.Time{},
		creating: map[string]struct{}{},
		shown:    map[string]shownView{},
		history:  newHistory(cfg.History),
		lookup:   newNodeLookup(),
		watchers: map[*watcher]struct{}{},
	}
	f, err := fleet.New(fleet.Config{
		View: fleetView{s}, Token: cfg.Token, HTTPClient: cfg.HTTPClient,
		NodeTimeout: cfg.NodeTimeout, Clock: cfg.Clock, Logger: cfg.Logger, Rand: cfg.Rand,
		ClaimObserver:     cfg.ClaimObserver,
		OperationObserver: cfg.OperationObserver,
	})
	if err != nil {
		return nil, err
	}
	s.fleet = f
	s.unsubscribe = s.inv.Subscribe(s.onChange)
	// Whatever the inventory already held was never a change to us.
	s.mu.Lock()
	for _, e := range s.inv.Sorted("") {
		s.reconcileLocked(e.Key())
	}
	s.mu.Unlock()
	return s, nil
}

// Run expires recent writes until ctx ends, then ends every watch and
// waits for the Service's goroutines.
func (s *Service) Run(ctx context.Context) {
	t := s.cfg.Clock.NewTicker(defaultSweep)
	defer func() {
		t.Stop()
		s.unsubscribe()
		s.stopOnce.Do(func() { close(s.stopped) })
		s.bg.Wait()
		s.fleet.Close()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			s.sweep()
		}
	}
}

// sweep drops expired overlays, which may change what a key shows.
func (s *Service) sweep() {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, ov := range s.overlays {
		if now.After(ov.expires) {
			s.reconcileLocked(key)
		}
	}
	for id, until := range s.released {
		if now.After(until) {
			delete(s.released, id)
		}
	}
}

func (s *Service) onChange(c inventory.Change) {
	key := c.Entry.Key()
	if key == "" {
		return // a sandbox of no namespace is not a Sandbox
	}
	s.mu.Lock()
	s.reconcileLocked(key)
	s.mu.Unlock()
}

// resolve decides what key shows, given the inventory's entry (nil when
// it has none) and this replica's overlay. confirmed says the overlay is
// done: the inventory agrees with it, or it expired.
func resolve(inv *inventory.Entry, ov *overlay, now time.Time) (cur view, visible, confirmed bool) {
	if ov == nil || now.After(ov.expires) {
		if inv == nil {
			return view{}, false, ov != nil
		}
		return view{entry: *inv}, true, ov != nil
	}
	if ov.deleted {
		if inv != nil && inv.ID == ov.entry.ID {
			return view{}, false, false // the node has not published the release yet
		}
		if inv == nil {
			return view{}, false, true
		}
		return view{entry: *inv}, true, true // a new claim under the same name
	}
	// The inventory confirms a write once it shows the same claim in the
	// same phase with a deadline at least as late (a renew), to the
	// second it publishes.
	if inv != nil && inv.ID == ov.entry.ID && inv.Phase == ov.entry.Phase &&
		!inv.Deadline.Before(ov.entry.Deadline.Add(-time.Second)) {
		return view{entry: *inv}, true, true
	}
	return ov.view, true, false
}

func splitKey(key string) (namespace, name string) {
	namespace, name, _ = strings.Cut(key, "/")
	return namespace, name
}

// currentLocked is what key shows now, without settling overlays.
func (s *Service) currentLocked(key string) (view, bool) {
	ns, name := splitKey(key)
	var inv *inventory.Entry
	if e, ok := s.inv.ByClaimRef(ns, name); ok {
		inv = &e
	}
	cur, visible, _ := resolve(inv, s.overlays[key], s.cfg.Clock.Now())
	return cur, visible
}

// reconcileLocked settles key's overlay and tells watchers what changed.
func (s *Service) reconcileLocked(key string) {
	ns, name := splitKey(key)
	var inv *inventory.Entry
	if e, ok := s.inv.ByClaimRef(ns, name); ok {
		inv = &e
	}
	cur, visible, confirmed := resolve(inv, s.overlays[key], s.cfg.Clock.Now())
	if confirmed {
		delete(s.overlays, key)
		s.settleName(key)
	}
	prev, had := s.shown[key]
	var typ registry.EventType
	switch {
	case visible && !had:
		typ = registry.Added
	case visible && !prev.same(&cur):
		typ = registry.Modified
	case !visible && had:
		typ = registry.Deleted
		cur = prev.view
	default:
		return
	}
	s.rev++
	if typ == registry.Deleted {
		delete(s.shown, key)
	} else {
		s.shown[key] = shownView{view: cur, rev: s.rev}
	}
	s.publishLocked(registry.Event{Type: typ, Sandbox: toSandbox(&cur, s.rev), Revision: s.rev})
}

// revLocked is the revision to stamp on key's current view.
func (s *Service) revLocked(key string, cur *view) registry.Revision {
	if sv, ok := s.shown[key]; ok && sv.same(cur) {
		return sv.rev
	}
	return s.rev
}

// Get implements the registry's Backend.
func (s *Service) Get(_ context.Context, namespace, name string) (*agentsv1beta1.Sandbox, error) {
	key := sandbox.ClaimRef{Namespace: namespace, Name: name}.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.currentLocked(key)
	if !ok {
		return nil, apierrors.NewNotFound(Resource, name)
	}
	return toSandbox(&cur, s.revLocked(key, &cur)), nil
}

// List implements the registry's Backend: the whole list, one page.
func (s *Service) List(ctx context.Context, namespace string) ([]agentsv1beta1.Sandbox, registry.Revision, error) {
	res, err := s.ListPage(ctx, namespace, registry.ListOptions{})
	return res.Items, res.Revision, err
}

// Fleet is the fleet core this Service claims through, over its own view
// (inventory and recent writes): the e2b front uses the same one, so both
// fronts share one view of what this replica did.
func (s *Service) Fleet() *fleet.Fleet { return s.fleet }

// remember records a write of this replica as an overlay, tells watchers
// and shares it with the peer replicas; it returns the view as served.
func (s *Service) remember(v view, deleted bool) *agentsv1beta1.Sandbox {
	now := s.cfg.Clock.Now()
	s.mu.Lock()
	out := s.overlayLocked(v, deleted, now)
	s.mu.Unlock()
	if s.cfg.Peers != nil {
		s.cfg.Peers.Share(writeOf(v, deleted, now))
	}
	return out
}

// overlayLocked lays a write made at over the inventory.
func (s *Service) overlayLocked(v view, deleted bool, at time.Time) *agentsv1beta1.Sandbox {
	key := v.entry.Key()
	expires := s.cfg.Clock.Now().Add(s.cfg.RecentTTL)
	s.overlays[key] = &overlay{view: v, deleted: deleted, expires: expires, at: at}
	if deleted && v.entry.ID != "" && len(s.released) < s.cfg.MaxRecent {
		s.released[v.entry.ID] = expires
	}
	if len(s.overlays) > s.cfg.MaxRecent {
		s.evictOldestLocked(key)
	}
	s.reconcileLocked(key)
	return toSandbox(&v, s.revLocked(key, &v))
}

// evictOldestLocked drops the overlay closest to expiry, other than keep's.
// It scans, but only once the cap is reached, which a burst of writes
// faster than RecentTTL drains causes.
func (s *Service) evictOldestLocked(keep string) {
	var oldest string
	var at time.Time
	for key, ov := range s.overlays {
		if key != keep && (oldest == "" || ov.expires.Before(at)) {
			oldest, at = key, ov.expires
		}
	}
	if oldest != "" {
		delete(s.overlays, oldest)
		s.settleName(oldest)
		s.reconcileLocked(oldest)
	}
}

// settleName lets key's name hold lapse once this replica no longer
// shows a write of its own over the inventory.
func (s *Service) settleName(key string) {
	if s.cfg.Names != nil {
		s.cfg.Names.Settle(key)
	}
}

// locate finds the sandbox a verb acts on.
func (s *Service) locate(namespace, name string) (view, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.currentLocked(sandbox.ClaimRef{Namespace: namespace, Name: name}.String())
	if !ok {
		return view{}, apierrors.NewNotFound(Resource, name)
	}
	if cur.entry.ID == "" || cur.entry.Address == "" {
		return view{}, apierrors.NewServiceUnavailable("the sandbox's node publishes no id or address for it")
	}
	return cur, nil
}
