package peerwrites

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// DefaultTimeout bounds how long a write waits for the peers.
const DefaultTimeout = 2 * time.Second

// SharerConfig configures a Sharer.
type SharerConfig struct {
	// Peers returns the host:port of every other replica. Required.
	Peers func() []string
	// Key signs the batches (DeriveKey). Required.
	Key []byte
	// Timeout bounds one write's wait for its peers; default
	// DefaultTimeout. A peer that has not answered by then is logged and
	// shows the write when its node publishes.
	Timeout time.Duration
	// Client sends the batches; default one of its own.
	Client *http.Client
	// Clock signs the batches and times the Timeout; default the real
	// clock. Tests inject a fake one to step a hung peer past the Timeout.
	Clock  clock.WithTickerAndDelayedExecution
	Logger *slog.Logger
}

// Sharer sends this replica's writes to its peers. Writes queued while a
// batch is in flight go out together in the next, so a burst of creates
// costs a few requests per peer, not one per create.
type Sharer struct {
	cfg  SharerConfig
	wake chan struct{}

	mu     sync.Mutex
	queued []queuedWrite
}

type queuedWrite struct {
	w    Write
	done chan struct{}
}

// NewSharer builds a Sharer; Run sends what Share queues.
func NewSharer(cfg SharerConfig) (*Sharer, error) {
	if cfg.Peers == nil || len(cfg.Key) == 0 {
		return nil, errors.New("peerwrites: Peers and Key are required")
	}
	if cfg.Timeout < 0 {
		return nil, errors.New("peerwrites: negative Timeout")
	}
	cfg.Timeout = cmp.Or(cfg.Timeout, DefaultTimeout)
	cfg.Clock = cmp.Or[clock.WithTickerAndDelayedExecution](cfg.Clock, clock.RealClock{})
	if cfg.Client == nil {
		cfg.Client = &http.Client{Transport: &http.Transport{
			MaxIdleConnsPerHost: 4, IdleConnTimeout: 90 * time.Second,
		}}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Sharer{cfg: cfg, wake: make(chan struct{}, 1)}, nil
}

// Share sends w to every peer and returns once each has acknowledged it,
// or after the Timeout.
func (s *Sharer) Share(w Write) {
	q := queuedWrite{w: w, done: make(chan struct{})}
	s.mu.Lock()
	s.queued = append(s.queued, q)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	t := s.cfg.Clock.NewTimer(s.cfg.Timeout)
	defer t.Stop()
	select {
	case <-q.done:
	case <-t.C():
	}
}

// Run sends batches until ctx ends.
func (s *Sharer) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			batch := s.queued
			s.queued = nil
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			s.send(ctx, batch)
			for _, q := range batch {
				close(q.done)
			}
		}
	}
}

// send delivers one batch to every peer at once.
func (s *Sharer) send(ctx context.Context, batch []queuedWrite) {
	for len(batch) > MaxWrites {
		s.send(ctx, batch[:MaxWrites])
		batch = batch[MaxWrites:]
	}
	ws := make([]Write, len(batch))
	for i, q := range batch {
		ws[i] = q.w
	}
	body, err := json.Marshal(ws)
	if err != nil {
		s.cfg.Logger.Error("Encoding writes for the peer replicas failed", "err", err)
		return
	}
	// The Timeout runs on the injected clock, not context.WithTimeout's
	// real one, so that a test's fake clock also ends the peers' requests.
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	expire := s.cfg.Clock.AfterFunc(s.cfg.Timeout, func() { cancel(context.DeadlineExceeded) })
	defer expire.Stop()
	var wg sync.WaitGroup
	for _, peer := range s.cfg.Peers() {
		wg.Go(func() {
			if err := s.post(ctx, peer, body); err != nil {
				s.cfg.Logger.Warn("A peer replica did not take this replica's writes; it shows them once the nodes publish",
					"peer", peer, "writes", len(ws), "err", err, "cause", context.Cause(ctx))
			}
		})
	}
	wg.Wait()
}

func (s *Sharer) post(ctx context.Context, peer string, body []byte) error {
	at := s.cfg.Clock.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+peer+Path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(headerTime, strconv.FormatInt(at.UnixNano(), 10))
	req.Header.Set(headerSignature, sign(s.cfg.Key, at, body))
	resp, err := s.cfg.Client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusNoContent {
		return fmt.Errorf("%s answered %d: %s", peer, resp.StatusCode, bytes.TrimSpace(msg))
	}
	return nil
}
