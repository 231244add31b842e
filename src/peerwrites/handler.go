package peerwrites

import (
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"k8s.io/utils/clock"
)

// Path is where a replica receives its peers' writes.
const Path = "/v1/writes"

// Receiver bounds.
const (
	// MaxBodyBytes bounds one batch: a burst of creates folds into one
	// batch, each write under 2 KiB with its object.
	MaxBodyBytes = 8 << 20
	// MaxWrites bounds the writes of one batch.
	MaxWrites = 4096
	// DefaultMaxSkew is how far a batch's time may be from the receiver's
	// clock: a captured batch cannot be replayed later than this.
	DefaultMaxSkew = 30 * time.Second
)

// HandlerConfig configures a Handler.
type HandlerConfig struct {
	// Key verifies the batches (DeriveKey). Required.
	Key []byte
	// Apply lays the writes over the replica's view. Required.
	Apply func([]Write)
	// MaxSkew bounds the batch's age; default DefaultMaxSkew.
	MaxSkew time.Duration
	Clock   clock.PassiveClock
	Logger  *slog.Logger
}

// Handler receives peers' writes at Path.
type Handler struct{ cfg HandlerConfig }

// NewHandler builds a Handler.
func NewHandler(cfg HandlerConfig) (*Handler, error) {
	if len(cfg.Key) == 0 || cfg.Apply == nil {
		return nil, errors.New("peerwrites: Key and Apply are required")
	}
	cfg.MaxSkew = cmp.Or(cfg.MaxSkew, DefaultMaxSkew)
	cfg.Clock = cmp.Or[clock.PassiveClock](cfg.Clock, clock.RealClock{})
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{cfg: cfg}, nil
}

// ServeHTTP answers 204 once the writes are applied. Every refusal is
// plain: a caller without the key learns nothing about sandboxes.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != Path {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	nanos, err := strconv.ParseInt(r.Header.Get(headerTime), 10, 64)
	if err != nil {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	at := time.Unix(0, nanos)
	if d := h.cfg.Clock.Since(at); d > h.cfg.MaxSkew || d < -h.cfg.MaxSkew {
		h.cfg.Logger.Warn("Refused a peer's writes sent outside the allowed clock skew", "peer", r.RemoteAddr, "age", d)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			http.Error(w, "batch too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "reading the batch failed", http.StatusBadRequest)
		return
	}
	if !verify(h.cfg.Key, at, body, r.Header.Get(headerSignature)) {
		h.cfg.Logger.Warn("Refused writes with a bad signature (is every replica given the same sandboxd token?)", "peer", r.RemoteAddr)
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	var ws []Write
	if err := json.Unmarshal(body, &ws); err != nil {
		http.Error(w, "the batch is not a JSON list of writes", http.StatusBadRequest)
		return
	}
	if len(ws) > MaxWrites {
		http.Error(w, "too many writes in one batch", http.StatusRequestEntityTooLarge)
		return
	}
	h.cfg.Apply(ws)
	w.WriteHeader(http.StatusNoContent)
}
