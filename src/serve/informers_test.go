package serve_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

type fakeFactory struct {
	started, shutdown atomic.Bool
	stop              <-chan struct{}
}

func (f *fakeFactory) Start(stop <-chan struct{}) { f.started.Store(true); f.stop = stop }
func (f *fakeFactory) Shutdown()                  { f.shutdown.Store(true) }

func TestInformersStartSyncAndShutDownWithTheGroup(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logs bytes.Buffer
		parent, cancel := context.WithCancel(context.Background())
		g := serve.NewGroup(parent, slog.New(slog.NewTextHandler(&logs, nil)))
		f := &fakeFactory{}
		var synced atomic.Bool
		g.Informers("NodeInventory", f, synced.Load)
		if !f.started.Load() {
			t.Fatal("the factory was not started")
		}

		synctest.Wait()
		if strings.Contains(logs.String(), "informers synced") {
			t.Fatal("logged a sync that has not happened")
		}
		synced.Store(true)
		time.Sleep(time.Second) // WaitForCacheSync polls on the bubble's clock
		synctest.Wait()
		if !strings.Contains(logs.String(), "informers=NodeInventory") {
			t.Fatalf("no sync line: %q", logs.String())
		}
		if f.shutdown.Load() {
			t.Fatal("the factory was shut down while the group still runs")
		}
		select {
		case <-f.stop:
			t.Fatal("the factory's stop channel closed while the group still runs")
		default:
		}

		cancel()
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		if !f.shutdown.Load() {
			t.Fatal("Wait returned before the factory was shut down")
		}
	})
}
