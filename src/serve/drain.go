package serve

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"k8s.io/utils/clock"
)

// Drain is the shutdown of a replica behind a Service. When the signal
// comes, the replica first reports itself not ready, so its endpoint is
// taken out of the Service, and keeps serving for the delay, since the
// endpoint's removal takes a moment to reach every proxy and client that
// routes to it; only when the delay has passed do its listeners stop
// accepting and drain what is in flight (each Server's shutdown timeout).
// Without the delay a rollout refuses the connections still routed to the
// old pod for that moment.
type Drain struct {
	draining atomic.Bool
	ctx      context.Context
}

// NewDrain starts draining when signal ends; Context ends delay later.
// A zero delay stops at the signal, as a process outside a Service may.
func NewDrain(signal context.Context, delay time.Duration, logger *slog.Logger) *Drain {
	return NewDrainWithClock(signal, delay, logger, clock.RealClock{})
}

// NewDrainWithClock is NewDrain counting the delay on clk, so a test can
// step through it rather than wait it out.
func NewDrainWithClock(signal context.Context, delay time.Duration, logger *slog.Logger, clk clock.WithDelayedExecution) *Drain {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(signal))
	d := &Drain{ctx: ctx}
	context.AfterFunc(signal, func() {
		d.draining.Store(true)
		if delay <= 0 {
			cancel()
			return
		}
		logger.Info("draining: reporting not ready and serving on before the listeners stop", "delay", delay)
		clk.AfterFunc(delay, cancel)
	})
	return d
}

// Draining reports whether the signal has come: readiness must fail.
func (d *Drain) Draining() bool { return d.draining.Load() }

// Context ends when the delay after the signal has passed: what the
// process's parts run under.
func (d *Drain) Context() context.Context { return d.ctx }
