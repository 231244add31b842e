package e2b

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/e2b/build"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// catalogTTL is how long a read of the nodes' promoted templates serves
// lookups. Templates change only through builds and deletes, which drop
// the cached read of the process that made them; another replica sees
// the change within this long.
const catalogTTL = 2 * time.Second

// buildLabel is the sandboxd template label that records which build a
// published tag holds, so every replica reports the same build id for a
// tag and a tag assigned to an existing build keeps that build's id.
const buildLabel = "e2b.build"

// published is one tag of a template a build published, as the nodes
// report it: each tag is its own promoted template on sandboxd.
type published struct {
	Namespace, Name, TemplateID string
	Tag                         string
	// BuildID is the build the tag holds: the buildLabel, or for a
	// template published without one, derived from its digest.
	BuildID string
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
	log   *slog.Logger

	mu    sync.Mutex
	read  time.Time
	items map[string]*published // by template id
	// partial is set when some node could not be read: a template missing
	// from items may be on it.
	partial bool
	// flight is the read in progress, shared by concurrent lookups.
	flight *catalogRead
}

type catalogRead struct {
	done    chan struct{}
	items   map[string]*published
	partial bool
	err     error
}

func newCatalog(f Fleet, clk clock.PassiveClock, log *slog.Logger) *catalog {
	return &catalog{fleet: f, clock: clk, log: log}
}

// invalidate drops the cached read after this process changed a template.
func (c *catalog) invalidate() {
	c.mu.Lock()
	c.items, c.read = nil, time.Time{}
	c.mu.Unlock()
}

// snapshot returns the current read, reading the nodes when it is stale;
// partial says some node could not be read.
func (c *catalog) snapshot(ctx context.Context) (items map[string]*published, partial bool, err error) {
	c.mu.Lock()
	if c.items != nil && c.clock.Since(c.read) < catalogTTL {
		items, partial := c.items, c.partial
		c.mu.Unlock()
		return items, partial, nil
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
		return fl.items, fl.partial, fl.err
	case <-ctx.Done():
		return nil, false, ctx.Err()
	}
}

// fill reads every node's templates, on its own deadline so one caller
// giving up does not fail the others sharing the read.
func (c *catalog) fill(fl *catalogRead) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	fl.items, fl.partial, fl.err = c.readNodes(ctx)
	c.mu.Lock()
	c.flight = nil
	if fl.err == nil {
		c.items, c.partial, c.read = fl.items, fl.partial, c.clock.Now()
	}
	c.mu.Unlock()
	close(fl.done)
}

// readNodes reads the published templates off every node through the
// fleet, which bounds each node by its node timeout: a node that does not
// answer leaves its templates out of this read (partial) rather than
// holding every lookup, and a read of no node at all is an error.
func (c *catalog) readNodes(ctx context.Context) (map[string]*published, bool, error) {
	nodes := c.fleet.NodeTemplates(ctx)
	items, failed := map[string]*published{}, 0
	for _, n := range nodes {
		if n.Err != nil {
			c.log.Warn("e2b: a node's templates could not be read", "node", n.Addr, "err", n.Err)
			failed++
			continue
		}
		for _, t := range n.Templates {
			ns, name, tag, ok := build.ParsePublished(t.Key.Template)
			if !ok {
				continue
			}
			id := build.TemplateID(ns, name)
			p := items[tagKey(id, tag)]
			// Two nodes holding one name disagree only while a build
			// replaces it; the newest is the template.
			if p == nil || t.CreatedAt.After(p.Created) {
				holders := []string(nil)
				if p != nil && p.Digest == t.ContentDigest {
					holders = p.Holders
				}
				p = &published{
					Namespace: ns, Name: name, TemplateID: id, Tag: tag, BuildID: cmp.Or(t.Labels[buildLabel], build.PublishedBuildID(t.ContentDigest)),
					Key: t.Key.WithDefaults(), Digest: t.ContentDigest,
					Holders: holders, Created: t.CreatedAt, CPUCount: t.CPUCount, MemoryMB: int(t.MemTotalBytes >> 20),
				}
				items[tagKey(id, tag)] = p
			}
			if t.ContentDigest == p.Digest {
				p.Holders = append(p.Holders, n.Addr)
			}
		}
	}
	if failed > 0 && failed == len(nodes) {
		return nil, false, fmt.Errorf("no node's templates could be read: %w", sandboxd.ErrUnavailable)
	}
	return items, failed > 0, nil
}

// errCatalogPartial is a template that is not in a read some node was
// missing from: it may be on that node.
var errCatalogPartial = fmt.Errorf("a node holding the template may be unreachable: %w", sandboxd.ErrUnavailable)

// tagKey is a published tag's key in a catalog read.
func tagKey(templateID, tag string) string { return templateID + ":" + tag }

// lookup finds the published tag of namespace that ref names: a name or
// an id, with ":tag" or without (the default tag). A tag that is not
// found while some node could not be read is errCatalogPartial, not a
// miss.
func (c *catalog) lookup(ctx context.Context, namespace, ref string) (*published, bool, error) {
	items, partial, err := c.snapshot(ctx)
	if err != nil {
		return nil, false, err
	}
	base, tag := build.SplitRef(ref)
	if p := items[tagKey(base, tag)]; p != nil && p.Namespace == namespace {
		return p, true, nil
	}
	if build.ValidName(base) == nil {
		if p := items[tagKey(build.TemplateID(namespace, base), tag)]; p != nil && p.Namespace == namespace {
			return p, true, nil
		}
	}
	if partial {
		return nil, false, errCatalogPartial
	}
	return nil, false, nil
}

// tags returns every published tag of the namespace's template named by
// ref (its name or id, without a tag), by tag.
func (c *catalog) tags(ctx context.Context, namespace, ref string) ([]*published, error) {
	items, partial, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	id := ref
	if build.ValidName(ref) == nil {
		id = build.TemplateID(namespace, ref)
	}
	var out []*published
	for _, p := range items {
		if p.Namespace == namespace && (p.TemplateID == ref || p.TemplateID == id) {
			out = append(out, p)
		}
	}
	if len(out) == 0 && partial {
		return nil, errCatalogPartial
	}
	slices.SortFunc(out, func(a, b *published) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

// list returns namespace's templates, by name: one row each, its default
// tag, or its newest tag when the default was removed.
func (c *catalog) list(ctx context.Context, namespace string) ([]*published, error) {
	items, _, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*published{}
	for _, p := range items {
		if p.Namespace != namespace {
			continue
		}
		if q := byID[p.TemplateID]; q == nil || q.Tag != build.DefaultTag && (p.Tag == build.DefaultTag || p.Created.After(q.Created)) {
			byID[p.TemplateID] = p
		}
	}
	out := slices.Collect(maps.Values(byID))
	slices.SortFunc(out, func(a, b *published) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
