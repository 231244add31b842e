package e2b

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
)

// catalogTTL is how long a read of the nodes' promoted templates serves
// lookups. Templates change only through builds and deletes, which drop
// the cached read of the process that made them; another replica sees
// the change within this long.
const catalogTTL = 2 * time.Second

// catalogFanout bounds the nodes read at once.
const catalogFanout = 16

// published is one template a build published, as the nodes report it.
type published struct {
	Namespace, Name, TemplateID string
	// Key is the sandboxd key claims of it use.
	Key    sandbox.PoolKey
	Digest string
	// Holders are the addresses of the nodes that hold it.
	Holders  []string
	Created  time.Time
	CPUCount int
	MemoryMB int
}

// catalog is the fleet's published templates: nothing is stored, every
// replica reads them off the nodes' GET /v1/info, where sandboxd lists
// the templates it holds.
type catalog struct {
	fleet Fleet
	clock clock.PassiveClock

	mu    sync.Mutex
	read  time.Time
	items map[string]*published // by template id
	// flight is the read in progress, shared by concurrent lookups.
	flight *catalogRead
}

type catalogRead struct {
	done  chan struct{}
	items map[string]*published
	err   error
}

func newCatalog(f Fleet, clk clock.PassiveClock) *catalog {
	return &catalog{fleet: f, clock: clk}
}

// invalidate drops the cached read after this process changed a template.
func (c *catalog) invalidate() {
	c.mu.Lock()
	c.items, c.read = nil, time.Time{}
	c.mu.Unlock()
}

// snapshot returns the current read, reading the nodes when it is stale.
func (c *catalog) snapshot(ctx context.Context) (map[string]*published, error) {
	c.mu.Lock()
	if c.items != nil && c.clock.Since(c.read) < catalogTTL {
		items := c.items
		c.mu.Unlock()
		return items, nil
	}
	fl := c.flight
	if fl == nil {
		fl = &catalogRead{done: make(chan struct{})}
		c.flight = fl
		go c.fill(fl)
	}
	c.mu.Unlock()
	select {
	case <-fl.done:
		return fl.items, fl.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// fill reads every node's templates, on its own deadline so one caller
// giving up does not fail the others sharing the read.
func (c *catalog) fill(fl *catalogRead) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	fl.items, fl.err = c.readNodes(ctx)
	c.mu.Lock()
	c.flight = nil
	if fl.err == nil {
		c.items, c.read = fl.items, c.clock.Now()
	}
	c.mu.Unlock()
	close(fl.done)
}

func (c *catalog) readNodes(ctx context.Context) (map[string]*published, error) {
	nodes, err := c.fleet.Nodes()
	if err != nil {
		return nil, fmt.Errorf("list the nodes: %w", err)
	}
	var mu sync.Mutex
	items := map[string]*published{}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(catalogFanout)
	for _, n := range nodes {
		g.Go(func() error {
			info, err := n.Info(ctx)
			if err != nil {
				return fmt.Errorf("read the templates of node %s: %w", n.Addr(), err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, t := range info.Templates {
				ns, name, ok := build.ParsePublished(t.Key.Template)
				if !ok {
					continue
				}
				id := build.TemplateID(ns, name)
				p := items[id]
				// Two nodes holding one name disagree only while a build
				// replaces it; the newest is the template.
				if p == nil || t.CreatedAt.After(p.Created) {
					holders := []string(nil)
					if p != nil && p.Digest == t.ContentDigest {
						holders = p.Holders
					}
					p = &published{
						Namespace: ns, Name: name, TemplateID: id, Key: t.Key.WithDefaults(), Digest: t.ContentDigest,
						Holders: holders, Created: t.CreatedAt, CPUCount: t.CPUCount, MemoryMB: int(t.MemTotalBytes >> 20),
					}
					items[id] = p
				}
				if t.ContentDigest == p.Digest {
					p.Holders = append(p.Holders, n.Addr())
				}
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return items, nil
}

// lookup finds the template of namespace named by ref: its name or its
// id.
func (c *catalog) lookup(ctx context.Context, namespace, ref string) (*published, bool, error) {
	items, err := c.snapshot(ctx)
	if err != nil {
		return nil, false, err
	}
	if p := items[ref]; p != nil && p.Namespace == namespace {
		return p, true, nil
	}
	if build.ValidName(ref) == nil {
		if p := items[build.TemplateID(namespace, ref)]; p != nil && p.Namespace == namespace {
			return p, true, nil
		}
	}
	return nil, false, nil
}

// list returns namespace's templates, by name.
func (c *catalog) list(ctx context.Context, namespace string) ([]*published, error) {
	items, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	var out []*published
	for _, p := range items {
		if p.Namespace == namespace {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *published) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
