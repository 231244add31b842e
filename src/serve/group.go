package serve

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
)

// Group runs the parts of a process until its context ends: when the
// parent context does, or as soon as one part fails, so that one failed
// listener or loop stops the whole process rather than leaving it half
// alive. Wait joins every part.
type Group struct {
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	once sync.Once
	err  error
}

// NewGroup returns a group whose context is a child of parent. logger
// (nil discards) gets one line when the group starts shutting down.
func NewGroup(parent context.Context, logger *slog.Logger) *Group {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(parent)
	g := &Group{log: logger, ctx: ctx, cancel: cancel}
	context.AfterFunc(ctx, func() { logger.Info("shutting down") })
	return g
}

// Context ends when the parent's does, a part fails or Stop is called.
func (g *Group) Context() context.Context { return g.ctx }

// Go runs fn with the group's context. fn must return once that context
// ends; an error it returns stops the group and, if it is the first, is
// what Wait returns, prefixed with name.
func (g *Group) Go(name string, fn func(ctx context.Context) error) {
	g.wg.Go(func() {
		if err := fn(g.ctx); err != nil {
			g.once.Do(func() { g.err = fmt.Errorf("%s: %w", name, err) })
			g.cancel()
		}
	})
}

// Loop runs a background loop that cannot fail, such as a store's or a
// mesh view's Run, until the group's context ends.
func (g *Group) Loop(fn func(ctx context.Context)) {
	g.wg.Go(func() { fn(g.ctx) })
}

// Stop ends the group's context without an error.
func (g *Group) Stop() { g.cancel() }

// Wait blocks until every part has returned and answers the first error.
func (g *Group) Wait() error {
	g.wg.Wait()
	g.cancel()
	return g.err
}
