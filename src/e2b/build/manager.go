package build

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
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
	// ErrQueued: every build slot is taken; the build waits for one and
	// starts by itself.
	ErrQueued = errors.New("every build slot is taken: the build is queued and starts when one frees")
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
}

// Manager keeps this process's builds and runs them, at most Parallel at
// once, in the order they were started.
type Manager struct {
	cfg Config
	run Runner

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	builds  map[string]*Build // by id
	running int
	queue   []*Build
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
	ctx, cancel := context.WithCancel(context.Background())
	return &Manager{cfg: cfg, run: run, ctx: ctx, cancel: cancel, builds: map[string]*Build{}}
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
	b := &Build{ID: newBuildID(), Spec: spec, m: m, status: Waiting, created: now, updated: now}
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
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []*Build
	for _, b := range m.builds {
		if b.Namespace == namespace {
			out = append(out, b)
		}
	}
	sortByCreation(out)
	return out
}

// Start hands b its definition and runs it, or queues it when every slot
// is taken (ErrQueued: it still runs, once a slot frees). Starting a build
// again is not an error and changes nothing (the SDK retries a 429 that
// says when to): a queued build is ErrQueued again, a started one nil.
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
	b.updated = m.cfg.Clock.Now().UTC()
	if m.running >= m.cfg.Parallel {
		b.queued = true
		b.mu.Unlock()
		m.queue = append(m.queue, b)
		return ErrQueued
	}
	b.mu.Unlock()
	m.launchLocked(b)
	return nil
}

// launchLocked runs b in its own goroutine within the build timeout.
func (m *Manager) launchLocked(b *Build) {
	m.running++
	ctx, cancel := context.WithTimeout(m.ctx, m.cfg.Timeout)
	b.mu.Lock()
	b.status, b.queued, b.cancel = Building, false, cancel
	b.updated = m.cfg.Clock.Now().UTC()
	b.mu.Unlock()
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
		if len(m.queue) > 0 && m.ctx.Err() == nil {
			next := m.queue[0]
			m.queue = m.queue[1:]
			m.launchLocked(next)
		}
		m.mu.Unlock()
	}()
}

// Forget drops the finished builds of a template, once the template is
// deleted: their records would list a template that no longer exists.
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
// started, more than Retention ago.
func (m *Manager) expireLocked(now time.Time) {
	for id, b := range m.builds {
		b.mu.Lock()
		idle := b.def == nil && b.status == Waiting && now.Sub(b.created) > m.cfg.Retention
		done := b.status.Done() && now.Sub(b.finished) > m.cfg.Retention
		b.mu.Unlock()
		if idle || done {
			delete(m.builds, id)
		}
	}
}

// Close stops every running build, fails the queued ones, and waits.
func (m *Manager) Close() {
	m.cancel()
	m.mu.Lock()
	queued := m.queue
	m.queue = nil
	m.mu.Unlock()
	for _, b := range queued {
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
