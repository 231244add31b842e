package serve_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

func TestFailingPartStopsTheGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		g := serve.NewGroup(context.Background(), nil)
		stopped := make(chan struct{})
		g.Loop(func(ctx context.Context) { <-ctx.Done(); close(stopped) })
		g.Go("quiet", func(ctx context.Context) error { <-ctx.Done(); return nil })
		boom := errors.New("boom")
		fail := make(chan struct{})
		g.Go("refresh loop", func(context.Context) error { <-fail; return boom })

		synctest.Wait()
		select {
		case <-stopped:
			t.Fatal("the group stopped before any part failed")
		default:
		}
		close(fail)
		err := g.Wait()
		if !errors.Is(err, boom) || !strings.HasPrefix(err.Error(), "refresh loop: ") {
			t.Fatalf("Wait = %v, want boom prefixed with the part's name", err)
		}
		<-stopped
	})
}

func TestFirstErrorWins(t *testing.T) {
	g := serve.NewGroup(context.Background(), nil)
	first := errors.New("first")
	g.Go("a", func(context.Context) error { return first })
	g.Go("b", func(ctx context.Context) error { <-ctx.Done(); return errors.New("second, after the stop") })
	if err := g.Wait(); !errors.Is(err, first) {
		t.Fatalf("Wait = %v, want the first failure", err)
	}
}

func TestParentEndStopsEveryPartWithoutError(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	g := serve.NewGroup(parent, nil)
	for range 3 {
		g.Go("part", func(ctx context.Context) error { <-ctx.Done(); return nil })
	}
	g.Loop(func(ctx context.Context) { <-ctx.Done() })
	cancel()
	if err := g.Wait(); err != nil {
		t.Fatalf("Wait = %v after the parent ended", err)
	}
	if g.Context().Err() == nil {
		t.Fatal("the group's context outlived Wait")
	}
}

func TestStop(t *testing.T) {
	g := serve.NewGroup(context.Background(), nil)
	g.Loop(func(ctx context.Context) { <-ctx.Done() })
	g.Stop()
	if err := g.Wait(); err != nil {
		t.Fatalf("Wait = %v after Stop", err)
	}
}
