package build

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Defaults of Config, the flags' defaults.
const (
	DefaultParallel = 2
	DefaultTimeout  = 30 * time.Minute
	DefaultLogLines = 10000
	// DefaultRetention is how long a finished build, or one registered
	// and never started, is kept for status polls.
	DefaultRetention = time.Hour
	// DefaultMaxBuilds bounds the builds one process keeps, so requests
	// that are never started cannot grow its memory without bound.
	DefaultMaxBuilds = 1000
)

// Errors of Register and Start; the surface maps each to a status code.
var (
	// ErrBusy: a build of the same template is waiting or building.
	ErrBusy = errors.New("a build of this template is already in progress")
	// ErrFull: the process keeps as many builds as it may.
	ErrFull = errors.New("too many builds are kept by this server; retry later")
	// ErrQueued: no build slot is free for the build's namespace; the
	// build waits for one and starts by itself.
	ErrQueued = errors.New("no build slot is free for this namespace: the build is queued and starts when one frees")
)

// Runner runs one build: from its Definition to a published template. It
// logs through b.Log and returns a *Failure when a step failed. ctx ends
// at the build timeout or when the manager closes.
type Runner func(ctx context.Context, b *Build) error

// Config configures a Manager; zero values take the defaults.
type Config struct {
	Parallel  int
	Timeout   time.Duration
	LogLines  int
	Retention time.Duration
	MaxBuilds int
	Clock     clock.Clock
	Logger    *slog.Logger
	// Expired hears of a template whose last build record expired (see
	// Retention), so what the builds uploaded can go with it; nil hears
	// nothing. It runs in its own goroutine, which Close waits for.
	Expired func(namespace, templateID string)
	// Observer hears how builds end and how many wait and run; nil hears
	// nothing.
	Observer Observer
}

// Manager keeps this process's builds and runs them, at most Parallel at
// once, shared fairly between namespaces (see fairShare).
type Manager struct {
	cfg Config
	run Runner

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu        sync.Mutex
	builds    map[string]*Build // by id
	running   int
	runningBy map[string]int // running builds by namespace
	queue     []*Build       // started builds waiting for a slot, oldest first
}

// NewManager builds a Manager that runs builds with run.
func NewManager(cfg Config, run Runner) *Manager {
	cfg.Parallel = cmp.Or(cfg.Parallel, DefaultParallel)
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.LogLines = cmp.Or(cfg.LogLines, DefaultLogLines)
	cfg.Retention = cmp.Or(cfg.Retention, DefaultRetention)
	cfg.MaxBuilds = cmp.Or(cfg.MaxBuilds, DefaultMaxBuilds)
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = unobserved{}
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, run: run, ctx: ctx, cancel: cancel, builds: map[string]*Build{}, runningBy: map[string]int{}}
}

// Timeout is the bound on one build.
func (m *Manager) Timeout() time.Duration { return m.cfg.Timeout }

// LogLines is how many log lines a build keeps.
func (m *Manager) LogLines() int { return m.cfg.LogLines }

// Register records a new build of spec, waiting for its definition.
func (m *Manager) Register(spec Spec) (*Build, error) {
	now := m.cfg.Clock.Now().UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(now)
	for _, b := range m.builds {
		if b.TemplateID == spec.TemplateID && b.Namespace == spec.Namespace && !b.Status().Done() {
			return nil, ErrBusy
		}
	}
	if len(m.builds) >= m.cfg.MaxBuilds {
		return nil, ErrFull
	}
	b := &Build{ID: newBuildID(), Spec: spec, m: m, status: Waiting, created: now, updated: now, done: make(chan struct{})}
	m.builds[b.ID] = b
	return b, nil
}

// Get returns the build id of templateID.
func (m *Manager) Get(templateID, id string) (*Build, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.builds[id]
	if !ok || b.TemplateID != templateID {
		return nil, false
	}
	return b, true
}

// Builds returns the builds of namespace this process keeps, oldest
// first.
func (m *Manager) Builds(namespace string) []*Build {
	now := m.cfg.Clock.Now().UTC()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expireLocked(now)
	var out []*Build
	for _, b := range m.builds {
		if b.Namespace == namespace {
			out = append(out, b)
		}
	}
	sortByCreation(out)
	return out
}

// Start hands b its definition and runs it, or queues it when no slot is
// free for its namespace (ErrQueued: it still runs, once one frees; its
// View says where it is in the queue). Starting a build again is not an
// error and changes nothing (the SDK may retry): a queued build is
// ErrQueued again, a started one nil.
func (m *Manager) Start(b *Build, def any) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	b.mu.Lock()
	switch {
	case b.queued:
		b.mu.Unlock()
		return ErrQueued
	case b.def != nil || b.status != Waiting:
		b.mu.Unlock()
		return nil
	}
	b.def = def
	b.queued = true
	b.updated = m.cfg.Clock.Now().UTC()
	b.mu.Unlock()
	m.queue = append(m.queue, b)
	m.dispatchLocked()
	if b.Status() == Waiting {
		return ErrQueued
	}
	return nil
}

// fairShareLocked is how many slots namespace may hold now: an equal
// share of the slots between the namespaces that have builds running or
// queued (namespace counted among them), and never every slot while
// there is more than one. Running builds are not stopped to restore a
// share, so without that last bound a namespace that started first could
// hold every slot with builds that never end (until the build timeout)
// and no other namespace's build would start; with it, one slot is always
// left to the others. A namespace alone gives up that one slot, which is
// the price of never making the next namespace wait for a timeout.
func (m *Manager) fairShareLocked(namespace string) int {
	active := map[string]bool{namespace: true}
	for ns, n := range m.runningBy {
		if n > 0 {
			active[ns] = true
		}
	}
	for _, q := range m.queue {
		active[q.Namespace] = true
	}
	share := (m.cfg.Parallel + len(active) - 1) / len(active)
	if m.cfg.Parallel > 1 {
		share = min(share, m.cfg.Parallel-1)
	}
	return max(share, 1)
}

// dispatchLocked launches queued builds while a slot is free for one,
// each time the one whose namespace runs the fewest builds (the oldest
// among equals), then tells the builds still queued where they stand.
func (m *Manager) dispatchLocked() {
	for m.running < m.cfg.Parallel && m.ctx.Err() == nil {
		next := -1
		for i, q := range m.queue {
			if m.runningBy[q.Namespace] >= m.fairShareLocked(q.Namespace) {
				continue
			}
			if next < 0 || m.runningBy[q.Namespace] < m.runningBy[m.queue[next].Namespace] {
				next = i
			}
		}
		if next < 0 {
			break
		}
		b := m.queue[next]
		m.queue = append(m.queue[:next], m.queue[next+1:]...)
		m.launchLocked(b)
	}
	m.positionLocked()
	m.reportSlotsLocked()
}

// reportSlotsLocked tells the Observer how many builds wait and run. It
// runs under mu after every change of the queue or of running, so the
// Observer hears the changes in the order they happened and its last
// word is the state now.
func (m *Manager) reportSlotsLocked() {
	m.cfg.Observer.ObserveSlots(len(m.queue), m.running)
}

// positionLocked records each queued build's place in the order the
// queue would start in if slots freed one at a time now (fewest running
// builds of its namespace first), and logs a place that changed, so the
// SDK's build log shows the wait.
func (m *Manager) positionLocked() {
	counts := make(map[string]int, len(m.runningBy))
	for ns, n := range m.runningBy {
		counts[ns] = n
	}
	left := append([]*Build(nil), m.queue...)
	for pos := 1; len(left) > 0; pos++ {
		next := 0
		for i, q := range left {
			if counts[q.Namespace] < counts[left[next].Namespace] {
				next = i
			}
		}
		b := left[next]
		left = append(left[:next], left[next+1:]...)
		counts[b.Namespace]++
		b.setQueuePosition(pos, m.running, m.cfg.Parallel, m.fairShareLocked(b.Namespace))
	}
}

// launchLocked runs b in its own goroutine within the build timeout.
func (m *Manager) launchLocked(b *Build) {
	m.running++
	m.runningBy[b.Namespace]++
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Timeout)
	b.mu.Lock()
	b.status, b.queued, b.queuePos, b.cancel = Building, false, 0, cancel
	b.updated = m.cfg.Clock.Now().UTC()
	b.began = b.updated
	canceled := b.canceled
	b.mu.Unlock()
	if canceled {
		cancel()
	}
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		err := m.run(ctx, b)
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			if _, ok := asFailure(err); !ok {
				err = &Failure{Message: fmt.Sprintf("the build did not finish within %s", m.cfg.Timeout)}
			}
		}
		b.finish(err)
		if err != nil {
			m.cfg.Logger.Info("Template build failed", "template", b.TemplateID, "build", b.ID, "err", err)
		} else {
			m.cfg.Logger.Info("Template build succeeded", "template", b.TemplateID, "build", b.ID)
		}
		m.mu.Lock()
		m.running--
		if m.runningBy[b.Namespace]--; m.runningBy[b.Namespace] <= 0 {
			delete(m.runningBy, b.Namespace)
		}
		m.dispatchLocked()
		m.mu.Unlock()
	}()
}

// Cancel stops every build of a template that has not ended: one waiting
// for its definition or queued ends at once, a running one has its
// context canceled. The returned channel is closed once all of them have
// ended, a running one once its Runner returned (and released what it
// held).
func (m *Manager) Cancel(namespace, templateID string) <-chan struct{} {
	m.mu.Lock()
	var waits []chan struct{}
	for _, b := range m.builds {
		if b.Namespace != namespace || b.TemplateID != templateID || b.Status().Done() {
			continue
		}
		waits = append(waits, b.done)
		b.mu.Lock()
		b.canceled = true
		cancel, status := b.cancel, b.status
		b.mu.Unlock()
		if status == Building {
			if cancel != nil {
				cancel()
			}
			continue
		}
		m.queue = slices.DeleteFunc(m.queue, func(q *Build) bool { return q == b })
		b.finish(&Failure{Message: errCanceled})
	}
	m.positionLocked()
	m.reportSlotsLocked()
	m.mu.Unlock()
	all := make(chan struct{})
	go func() {
		for _, w := range waits {
			<-w
		}
		close(all)
	}()
	return all
}

// errCanceled is a canceled build's failure reason.
const errCanceled = "the build was canceled: its template was deleted"

// Namespace returns the namespace of the builds of templateID this
// process keeps; ok is false when it keeps none.
func (m *Manager) Namespace(templateID string) (namespace string, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, b := range m.builds {
		if b.TemplateID == templateID {
			return b.Namespace, true
		}
	}
	return "", false
}

// Forget drops the finished builds of a template, once the template is
// deleted: their records would list a template that no longer exists.
// Cancel the template's builds first to drop them all.
func (m *Manager) Forget(namespace, templateID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for id, b := range m.builds {
		if b.Namespace == namespace && b.TemplateID == templateID && b.Status().Done() {
			delete(m.builds, id)
		}
	}
}

// expireLocked forgets builds that finished, or were registered and never
// started, more than Retention ago, and tells Expired of each template
// left with no build record.
func (m *Manager) expireLocked(now time.Time) {
	var dropped []*Build
	for id, b := range m.builds {
		b.mu.Lock()
		idle := b.def == nil && b.status == Waiting && now.Sub(b.created) > m.cfg.Retention
		done := b.status.Done() && now.Sub(b.finished) > m.cfg.Retention
		b.mu.Unlock()
		if idle || done {
			delete(m.builds, id)
			dropped = append(dropped, b)
		}
	}
	// After Close nothing new starts: Close may be waiting on wg.
	if m.cfg.Expired == nil || m.ctx.Err() != nil {
		return
	}
	for _, b := range dropped {
		if m.keepsLocked(b.Namespace, b.TemplateID) {
			continue
		}
		ns, id := b.Namespace, b.TemplateID
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			m.cfg.Expired(ns, id)
		}()
	}
}

// keepsLocked reports whether a build of the template is still recorded.
func (m *Manager) keepsLocked(namespace, templateID string) bool {
	for _, b := range m.builds {
		if b.Namespace == namespace && b.TemplateID == templateID {
			return true
		}
	}
	return false
}

// Close stops every running build, fails the queued ones, and waits.
func (m *Manager) Close() {
	m.cancel()
	m.mu.Lock()
	queued := m.queue
	m.queue = nil
	m.reportSlotsLocked()
	m.mu.Unlock()
	for _, b := range queued {
		b.finish(&Failure{Message: "the server stopped before the build could start"})
	}
	// Builds registered and never started end too, so nothing waits on
	// them.
	m.mu.Lock()
	var idle []*Build
	for _, b := range m.builds {
		if b.Status() == Waiting {
			idle = append(idle, b)
		}
	}
	m.mu.Unlock()
	for _, b := range idle {
		b.finish(&Failure{Message: "the server stopped before the build could start"})
	}
	m.wg.Wait()
}

// newBuildID is a random UUID (version 4), the shape e2b's build ids have.
func newBuildID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
