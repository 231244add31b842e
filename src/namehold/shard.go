package namehold

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Write retry bounds: conflicts with other replicas are retried at once
// (each retry reads the winner's write), failures of the API after a
// growing pause so an outage is not hammered.
const (
	maxConflicts   = 16
	minBackoff     = 100 * time.Millisecond
	maxBackoff     = 5 * time.Second
	shardLabelKey  = "app.kubernetes.io/component"
	shardLabelName = "sandbox-name-holds"
)

// waiter is one Acquire waiting for its shard's next write.
type waiter struct {
	done chan error // buffered: the writer never blocks on a gone caller
}

// shard is one ConfigMap and the operations queued for its next write.
// One goroutine (run) writes it; the rest only queue.
type shard struct {
	name string
	cfg  *Config
	wake chan struct{}

	mu       sync.Mutex
	acquires map[string][]*waiter
	releases map[string]struct{}
	frees    map[string]struct{}
	// freed are the Frees waiting for the write that carries them.
	freed []*waiter
	// kept are the holds this replica renews, with the time it stops.
	kept     map[string]time.Time
	renewDue bool

	// cached is the last version of the object this replica read or
	// wrote; only run touches it.
	cached *corev1.ConfigMap
}

func newShard(name string, cfg *Config) *shard {
	return &shard{
		name: name, cfg: cfg, wake: make(chan struct{}, 1),
		acquires: map[string][]*waiter{}, releases: map[string]struct{}{},
		frees: map[string]struct{}{}, kept: map[string]time.Time{},
	}
}

func (s *shard) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *shard) enqueue(key string) *waiter {
	w := &waiter{done: make(chan error, 1)}
	s.mu.Lock()
	s.acquires[key] = append(s.acquires[key], w)
	s.mu.Unlock()
	s.signal()
	return w
}

// abandon withdraws an Acquire whose caller gave up: still queued, it is
// simply dropped; already written, the hold is given up again.
func (s *shard) abandon(key string, w *waiter) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ws := s.acquires[key]; slices.Contains(ws, w) {
		s.acquires[key] = slices.DeleteFunc(ws, func(x *waiter) bool { return x == w })
		if len(s.acquires[key]) == 0 {
			delete(s.acquires, key)
		}
		return
	}
	delete(s.kept, key)
	s.releases[key] = struct{}{}
	s.signal()
}

func (s *shard) settle(key string) {
	s.mu.Lock()
	delete(s.kept, key)
	s.mu.Unlock()
}

func (s *shard) drop(key string, anyHolder bool) *waiter {
	w := &waiter{done: make(chan error, 1)}
	s.mu.Lock()
	delete(s.kept, key)
	if anyHolder {
		s.frees[key] = struct{}{}
		s.freed = append(s.freed, w)
	} else {
		s.releases[key] = struct{}{}
	}
	s.mu.Unlock()
	s.signal()
	return w
}

func (s *shard) renewSoon() {
	s.mu.Lock()
	due := len(s.kept) > 0
	s.renewDue = s.renewDue || due
	s.mu.Unlock()
	if due {
		s.signal()
	}
}

// batch is what one write carries.
type batch struct {
	acquires map[string][]*waiter
	releases map[string]struct{}
	frees    map[string]struct{}
	freed    []*waiter
	renews   []string
}

func (b *batch) empty() bool {
	return len(b.acquires) == 0 && len(b.releases) == 0 && len(b.frees) == 0 && len(b.renews) == 0
}

// waiting is how many Acquires the batch answers.
func (b *batch) waiting() int {
	n := 0
	for _, ws := range b.acquires {
		n += len(ws)
	}
	return n
}

// take moves the queued operations into a batch. Every write renews all
// kept holds, since it costs nothing extra; holds kept past MaxKeep are
// let go here.
func (s *shard) take(now time.Time) *batch {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := &batch{acquires: s.acquires, releases: s.releases, frees: s.frees, freed: s.freed}
	s.acquires, s.releases, s.frees, s.freed = map[string][]*waiter{}, map[string]struct{}{}, map[string]struct{}{}, nil
	for key, until := range s.kept {
		if now.After(until) {
			delete(s.kept, key)
			continue
		}
		b.renews = append(b.renews, key)
	}
	if !s.renewDue && len(b.acquires) == 0 && len(b.releases) == 0 && len(b.frees) == 0 {
		b.renews = nil // nothing asked for a write yet
	}
	s.renewDue = false
	return b
}

// requeue puts back the releases and frees of a failed write, unless a
// newer operation on the same key came in meanwhile.
func (s *shard) requeue(b *batch) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for key := range b.releases {
		if _, acquiring := s.acquires[key]; !acquiring {
			s.releases[key] = struct{}{}
		}
	}
	for key := range b.frees {
		if _, acquiring := s.acquires[key]; !acquiring {
			s.frees[key] = struct{}{}
		}
	}
	// A Free keeps waiting for the write that carries it; one a newer
	// Acquire of the key overtook is answered by that Acquire's write.
	s.freed = append(s.freed, b.freed...)
	s.renewDue = s.renewDue || len(b.renews) > 0
}

// settleBatch records a written batch: granted holds are kept unless given
// up while the write was in flight; renewals that found no hold of ours
// stop.
func (s *shard) settleBatch(now time.Time, granted []string, lost []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, key := range granted {
		_, released := s.releases[key]
		_, freed := s.frees[key]
		if !released && !freed {
			s.kept[key] = now.Add(s.cfg.MaxKeep)
		}
	}
	for _, key := range lost {
		delete(s.kept, key)
	}
}

func (s *shard) pending() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.acquires) > 0 || len(s.releases) > 0 || len(s.frees) > 0 || s.renewDue
}

// run writes the shard whenever something is queued. Operations queued
// during a write go into the next one, which is what batches them.
func (s *shard) run(ctx context.Context) {
	backoff := time.Duration(0)
	defer s.failQueued(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for s.pending() && ctx.Err() == nil {
			if err := s.flush(ctx); err != nil {
				backoff = min(max(2*backoff, minBackoff), maxBackoff)
				s.cfg.Logger.Warn("Writing sandbox name holds failed; creates wait or fail until it succeeds",
					"object", s.name, "namespace", s.cfg.Namespace, "retryIn", backoff, "err", err)
				select {
				case <-ctx.Done():
					return
				case <-s.cfg.Clock.After(backoff):
				}
				continue
			}
			backoff = 0
		}
	}
}

// failQueued answers the Acquires still queued when the writer stops.
func (s *shard) failQueued(ctx context.Context) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stopped := fmt.Errorf("the name hold writer stopped: %w", context.Cause(ctx))
	for _, ws := range s.acquires {
		for _, w := range ws {
			w.done <- stopped
		}
	}
	for _, w := range s.freed {
		w.done <- stopped
	}
	s.acquires, s.freed = map[string][]*waiter{}, nil
}

// flush writes one batch. Acquires are answered either way; a failed
// write's releases, frees and renewals are queued again.
func (s *shard) flush(ctx context.Context) error {
	b := s.take(s.cfg.Clock.Now())
	if b.empty() {
		return nil
	}
	results, lost, contended, err := s.write(ctx, b)
	if n := b.waiting(); contended && n > 0 {
		s.cfg.Observer.ObserveContended(n)
	}
	if err != nil {
		s.requeue(b)
		for _, ws := range b.acquires {
			for _, w := range ws {
				w.done <- err
			}
		}
		return err
	}
	var granted []string
	for key, ws := range b.acquires {
		if results[key] == nil {
			granted = append(granted, key)
		}
		for _, w := range ws {
			if errors.Is(results[key], ErrHeld) {
				s.cfg.Observer.ObserveHeld()
			}
			w.done <- results[key]
		}
	}
	for _, w := range b.freed {
		w.done <- nil
	}
	s.settleBatch(s.cfg.Clock.Now(), granted, lost)
	return nil
}

// write applies b to the object with a compare-and-set update, reading
// the object again after each conflict; contended says there was one.
func (s *shard) write(ctx context.Context, b *batch) (outcome map[string]error, lost []string, contended bool, err error) {
	for range maxConflicts {
		cur, fresh, err := s.current(ctx)
		if err != nil {
			return nil, nil, contended, err
		}
		a, lost, changed := apply(cur.Data, b, s.cfg, s.cfg.Clock.Now())
		if !changed {
			if !fresh {
				// Nothing to write, judged on a cached copy: another
				// replica may have freed a name since, so judge again on
				// the object as it is.
				s.cached = nil
				continue
			}
			return a.outcome, lost, contended, nil
		}
		next := cur.DeepCopy()
		next.Data = a.data
		updated, err := s.call(ctx, func(ctx context.Context) (*corev1.ConfigMap, error) {
			return s.cfg.ConfigMaps.ConfigMaps(s.cfg.Namespace).Update(ctx, next, metav1.UpdateOptions{})
		})
		switch {
		case err == nil:
			s.cached = updated
			return a.outcome, lost, contended, nil
		case apierrors.IsConflict(err):
			s.cached = nil // another replica wrote: read its version
			contended = true
		default:
			s.cached = nil
			return nil, nil, contended, fmt.Errorf("writing %s/%s: %w", s.cfg.Namespace, s.name, err)
		}
	}
	return nil, nil, contended, fmt.Errorf("writing %s/%s: still conflicting after %d tries", s.cfg.Namespace, s.name, maxConflicts)
}

// current is the object as last read or written, read (or made) when
// unknown; fresh says it was read just now.
func (s *shard) current(ctx context.Context) (cm *corev1.ConfigMap, fresh bool, err error) {
	if s.cached != nil {
		return s.cached, false, nil
	}
	cms := s.cfg.ConfigMaps.ConfigMaps(s.cfg.Namespace)
	cm, err = s.call(ctx, func(ctx context.Context) (*corev1.ConfigMap, error) {
		return cms.Get(ctx, s.name, metav1.GetOptions{})
	})
	if apierrors.IsNotFound(err) {
		cm, err = s.call(ctx, func(ctx context.Context) (*corev1.ConfigMap, error) {
			return cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
				Name: s.name, Namespace: s.cfg.Namespace,
				Labels: map[string]string{shardLabelKey: shardLabelName},
			}}, metav1.CreateOptions{})
		})
		if apierrors.IsAlreadyExists(err) {
			cm, err = s.call(ctx, func(ctx context.Context) (*corev1.ConfigMap, error) {
				return cms.Get(ctx, s.name, metav1.GetOptions{})
			})
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading %s/%s: %w", s.cfg.Namespace, s.name, err)
	}
	s.cached = cm
	return cm, true, nil
}

func (s *shard) call(ctx context.Context, fn func(context.Context) (*corev1.ConfigMap, error)) (*corev1.ConfigMap, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	return fn(ctx)
}

// applied is a batch applied to a shard's data.
type applied struct {
	data    map[string]string
	outcome map[string]error // per acquired key: nil, ErrHeld or ErrFull
}

// apply computes the shard's next data: lapsed and unreadable holds go,
// then frees, releases, acquires and renewals, in that order, so a create
// that follows a delete of the same name in one batch wins.
func apply(data map[string]string, b *batch, cfg *Config, now time.Time) (a applied, lost []string, changed bool) {
	a = applied{data: make(map[string]string, len(data)+len(b.acquires)), outcome: map[string]error{}}
	for k, v := range data {
		if e, ok := decodeEntry(v); ok && now.Before(e.Expires) {
			a.data[k] = v
		}
	}
	ours := func(key string) (entry, bool) {
		e, ok := decodeEntry(a.data[dataKey(key)])
		return e, ok && e.Holder == cfg.Identity
	}
	for key := range b.frees {
		delete(a.data, dataKey(key))
	}
	for key := range b.releases {
		if _, ok := ours(key); ok {
			delete(a.data, dataKey(key))
		}
	}
	put := func(key string) error {
		v, err := entry{Name: key, Holder: cfg.Identity, Expires: now.Add(cfg.TTL)}.encode()
		if err == nil {
			a.data[dataKey(key)] = v
		}
		return err
	}
	for _, key := range slices.Sorted(maps.Keys(b.acquires)) {
		dk := dataKey(key)
		if _, held := a.data[dk]; held {
			if _, mine := ours(key); !mine {
				a.outcome[key] = ErrHeld
				continue
			}
		} else if len(a.data) >= cfg.MaxPerShard {
			a.outcome[key] = ErrFull
			continue
		}
		a.outcome[key] = put(key)
	}
	for _, key := range b.renews {
		if _, ok := ours(key); !ok {
			lost = append(lost, key)
			continue
		}
		_ = put(key)
	}
	return a, lost, !maps.Equal(a.data, data)
}
