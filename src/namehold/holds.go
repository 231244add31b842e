package namehold

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/clock"
)

// Shards is how many ConfigMaps hold the names. It is fixed, not
// configured, because the chart's RBAC names every object (ObjectName) and
// every replica must hash a name to the same one.
const Shards = 8

// ObjectPrefix starts the name of every shard's ConfigMap.
const ObjectPrefix = "sandbox-name-holds-"

// ObjectName is shard i's ConfigMap.
func ObjectName(i int) string { return ObjectPrefix + strconv.Itoa(i) }

// Defaults for Config's zero values.
const (
	// DefaultTTL is how long a hold outlives its last renewal. A replica
	// that dies just after its claim leaves the sandbox unpublished until
	// the node's next publish (vk-sandbox: every 30 s), and only the hold
	// keeps another replica from claiming the name again meanwhile: so it
	// must outlast a publish interval and the informers' delay, while
	// freeing a dead replica's names within a minute.
	DefaultTTL = 60 * time.Second
	// DefaultMaxKeep bounds how long a replica renews one hold, in case the
	// create it guards is never confirmed: twice backend.DefaultRecentTTL.
	DefaultMaxKeep = 2 * time.Minute
	// DefaultRequestTimeout bounds each call to the Kubernetes API.
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMaxPerShard bounds the holds one shard stores, which keeps its
	// object well under the API's size limit (about 160 bytes a hold).
	DefaultMaxPerShard = 4096
)

// Errors of Acquire.
var (
	// ErrHeld: another replica holds the name: a create of it is in flight
	// or not yet published. The caller answers AlreadyExists.
	ErrHeld = errors.New("another create holds this name")
	// ErrFull: the name's shard holds MaxPerShard names; the caller asks
	// the client to retry later.
	ErrFull = errors.New("too many creates in flight")
)

// Config configures Holds.
type Config struct {
	// ConfigMaps writes the shards. Required.
	ConfigMaps corev1client.ConfigMapsGetter
	// Namespace holds the shards. Required.
	Namespace string
	// Identity names this replica in the holds it writes; default the
	// host name and a random suffix, so replicas on one host differ.
	Identity string
	// TTL is how long a hold lives past its last renewal; default
	// DefaultTTL. Replicas' clocks must agree to well within it.
	TTL time.Duration
	// MaxKeep bounds how long one hold is renewed; default DefaultMaxKeep.
	MaxKeep time.Duration
	// RequestTimeout bounds each API call; default DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxPerShard bounds the holds in one shard; default DefaultMaxPerShard.
	MaxPerShard int
	// Clock is the process clock; default the real one.
	Clock clock.WithTicker
	// Logger receives write failures; default discards.
	Logger *slog.Logger
	// Observer hears when another replica held a name or contended for a
	// shard; nil hears nothing.
	Observer Observer
}

// Holds takes, renews and gives up this replica's holds on names. Create it
// with New and Run it; Acquire waits for Run's writers.
type Holds struct {
	cfg    Config
	shards [Shards]*shard
}

// New checks cfg and builds Holds.
func New(cfg Config) (*Holds, error) {
	if cfg.ConfigMaps == nil || cfg.Namespace == "" {
		return nil, errors.New("namehold: ConfigMaps and Namespace are required")
	}
	if cfg.Identity == "" {
		id, err := defaultIdentity()
		if err != nil {
			return nil, err
		}
		cfg.Identity = id
	}
	cfg.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	cfg.MaxKeep = cmp.Or(cfg.MaxKeep, DefaultMaxKeep)
	cfg.RequestTimeout = cmp.Or(cfg.RequestTimeout, DefaultRequestTimeout)
	cfg.MaxPerShard = cmp.Or(cfg.MaxPerShard, DefaultMaxPerShard)
	cfg.Clock = cmp.Or[clock.WithTicker](cfg.Clock, clock.RealClock{})
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Observer == nil {
		cfg.Observer = unobserved{}
	}
	if cfg.TTL < 0 || cfg.MaxKeep < 0 || cfg.RequestTimeout < 0 || cfg.MaxPerShard < 0 {
		return nil, errors.New("namehold: negative Config value")
	}
	h := &Holds{cfg: cfg}
	for i := range h.shards {
		h.shards[i] = newShard(ObjectName(i), &h.cfg)
	}
	return h, nil
}

func defaultIdentity() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("namehold: reading the host name for the holder identity: %w", err)
	}
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("namehold: random holder identity: %w", err)
	}
	return host + "_" + hex.EncodeToString(b[:]), nil
}

// Identity is the holder name this replica writes.
func (h *Holds) Identity() string { return h.cfg.Identity }

// Run writes the shards and renews the holds this replica keeps until ctx
// ends. Holds are not given up on the way out: they lapse within TTL.
func (h *Holds) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, s := range h.shards {
		wg.Go(func() { s.run(ctx) })
	}
	t := h.cfg.Clock.NewTicker(h.cfg.TTL / 3)
	defer func() {
		t.Stop()
		wg.Wait()
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
			for _, s := range h.shards {
				s.renewSoon()
			}
		}
	}
}

// Acquire takes a hold on key ("<namespace>/<name>") for a create, and keeps
// renewing it until Settle, Release or Free. It fails with ErrHeld when
// another replica holds key, ErrFull when its shard is full, and otherwise
// with the API's error: the caller must not claim without a hold. A hold
// granted after ctx ended is given up again.
func (h *Holds) Acquire(ctx context.Context, key string) error {
	s := h.shards[shardOf(key)]
	w := s.enqueue(key)
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		s.abandon(key, w)
		return fmt.Errorf("waiting for a hold on %s: %w", key, context.Cause(ctx))
	}
}

// Settle stops renewing key's hold, which then lapses within TTL: the
// create it guarded is confirmed (the inventory shows the sandbox) or was
// given up on.
func (h *Holds) Settle(key string) { h.shards[shardOf(key)].settle(key) }

// Release gives up this replica's hold on key at the next write: the
// create it guarded failed, and no sandbox has the name.
func (h *Holds) Release(key string) { h.shards[shardOf(key)].drop(key, false) }

// Free removes any replica's hold on key at the next write: the sandbox
// with that name was deleted, so the name is free again. It returns once
// that write has landed, so a create of the name through another replica
// right after the delete is answered finds no hold; when ctx ends first
// the hold still goes at a later write, and the error says so.
func (h *Holds) Free(ctx context.Context, key string) error {
	w := h.shards[shardOf(key)].drop(key, true)
	select {
	case err := <-w.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("waiting for the hold on %s to be freed: %w", key, context.Cause(ctx))
	}
}
