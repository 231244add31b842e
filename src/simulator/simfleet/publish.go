package simfleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/client-go/dynamic"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/publisher"
)

// PublishConfig makes every node of a fleet publish its NodeInventory to a
// kube-apiserver, as vk-sandbox does beside a real sandboxd: one object per
// node, named after it, applied at once and then every Interval. A killed
// node stops publishing and its object is left to go stale, as a dead
// node's would.
type PublishConfig struct {
	// Client reaches the apiserver (which must serve the NodeInventory
	// CRD). Required.
	Client dynamic.Interface
	// Interval between publishes; default publisher.DefaultInterval (30 s).
	Interval time.Duration
	// FieldManager is the server-side apply manager; default
	// publisher.DefaultFieldManager.
	FieldManager string
}

// publishers runs one publisher per node.
type publishers struct {
	mu      sync.Mutex
	cancels []context.CancelFunc
	wg      sync.WaitGroup
}

// start begins publishing n's inventory; stop(i) or stopAll ends it.
func (p *publishers) start(cfg PublishConfig, n *node.Node, logger *slog.Logger) error {
	pub, err := publisher.New(publisher.Config{
		Client:       cfg.Client,
		Interval:     cfg.Interval,
		FieldManager: cfg.FieldManager,
		Logger:       logger.With("node", n.Name()),
		Source: func(context.Context) (*v1beta1.NodeInventory, error) {
			return publisher.FromSnapshot(n.Snapshot()), nil
		},
	})
	if err != nil {
		return fmt.Errorf("fleet: publisher for %s: %w", n.Name(), err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.mu.Lock()
	p.cancels = append(p.cancels, cancel)
	p.mu.Unlock()
	p.wg.Go(func() { _ = pub.Run(ctx) })
	return nil
}

// stop ends node i's publisher, if it has one.
func (p *publishers) stop(i int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if i < len(p.cancels) {
		p.cancels[i]()
	}
}

// stopAll ends every publisher and waits for them to return.
func (p *publishers) stopAll() {
	p.mu.Lock()
	for _, cancel := range p.cancels {
		cancel()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

func (c *PublishConfig) validate() error {
	if c.Client == nil {
		return errors.New("fleet: Publish.Client is required")
	}
	if c.Interval < 0 {
		return fmt.Errorf("fleet: negative Publish.Interval %v", c.Interval)
	}
	return nil
}
