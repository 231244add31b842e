package catalog

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
	"github.com/cocoonstack/sandbox-operator/src/fleet"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// ttl is how long a read of the nodes' promoted templates serves
// lookups. Templates change only through builds and deletes, which drop
// the cached read of the process that made them; another replica sees
// the change within this long.
const ttl = 2 * time.Second

// BuildLabel is the sandboxd template label that records which build a
// published tag holds, so every replica reports the same build id for a
// tag and a tag assigned to an existing build keeps that build's id.
const BuildLabel = "e2b.build"

// Published is one tag of a template a build published, as the nodes
// report it: each tag is its own promoted template on sandboxd.
type Published struct {
	Namespace, Name, TemplateID string
	Tag                         string
	// BuildID is the build the tag holds: the BuildLabel, or for a
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

// Nodes is what the catalog reads of the fleet: every node's promoted
// templates, one entry per node, a node that could not be read with its
// Err. The surface's Fleet (and *fleet.Fleet) implements it.
type Nodes interface {
	NodeTemplates(ctx context.Context) []fleet.NodeTemplates
}

// Catalog is the fleet's published templates: nothing is stored, every
// replica reads them off the nodes' GET /v1/info, where sandboxd lists
// the templates it holds.
type Catalog struct {
	nodes Nodes
	clock clock.PassiveClock
	log   *slog.Logger

	mu    sync.Mutex
	read  time.Time
	items map[string]*Published // by template id
	// partial is set when some node could not be read: a template missing
	// from items may be on it.
	partial bool
	// flight is the read in progress, shared by concurrent lookups.
	flight *catalogRead
}

type catalogRead struct {
	done    chan struct{}
	items   map[string]*Published
	partial bool
	err     error
}

// New returns a catalog that reads the templates off nodes.
func New(nodes Nodes, clk clock.PassiveClock, log *slog.Logger) *Catalog {
	return &Catalog{nodes: nodes, clock: clk, log: log}
}

// Invalidate drops the cached read after this process changed a template.
func (c *Catalog) Invalidate() {
	c.mu.Lock()
	c.items, c.read = nil, time.Time{}
	c.mu.Unlock()
}

// snapshot returns the current read, reading the nodes when it is stale;
// partial says some node could not be read.
func (c *Catalog) snapshot(ctx context.Context) (items map[string]*Published, partial bool, err error) {
	c.mu.Lock()
	if c.items != nil && c.clock.Since(c.read) < ttl {
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
func (c *Catalog) fill(fl *catalogRead) {
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
func (c *Catalog) readNodes(ctx context.Context) (map[string]*Published, bool, error) {
	nodes := c.nodes.NodeTemplates(ctx)
	items, failed := map[string]*Published{}, 0
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
				p = &Published{
					Namespace: ns, Name: name, TemplateID: id, Tag: tag, BuildID: cmp.Or(t.Labels[BuildLabel], build.PublishedBuildID(t.ContentDigest)),
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

// ErrPartial is a template that is not in a read some node was missing
// from: it may be on that node. It wraps sandboxd.ErrUnavailable.
var ErrPartial = fmt.Errorf("a node holding the template may be unreachable: %w", sandboxd.ErrUnavailable)

// tagKey is a published tag's key in a catalog read.
func tagKey(templateID, tag string) string { return templateID + ":" + tag }

// Lookup finds the published tag of namespace that ref names: a name or
// an id, with ":tag" or without (the default tag). A tag that is not
// found while some node could not be read is ErrPartial, not a
// miss.
func (c *Catalog) Lookup(ctx context.Context, namespace, ref string) (*Published, bool, error) {
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
		return nil, false, ErrPartial
	}
	return nil, false, nil
}

// Tags returns every published tag of the namespace's template named by
// ref (its name or id, without a tag), by tag.
func (c *Catalog) Tags(ctx context.Context, namespace, ref string) ([]*Published, error) {
	items, partial, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	id := ref
	if build.ValidName(ref) == nil {
		id = build.TemplateID(namespace, ref)
	}
	var out []*Published
	for _, p := range items {
		if p.Namespace == namespace && (p.TemplateID == ref || p.TemplateID == id) {
			out = append(out, p)
		}
	}
	if len(out) == 0 && partial {
		return nil, ErrPartial
	}
	slices.SortFunc(out, func(a, b *Published) int { return strings.Compare(a.Tag, b.Tag) })
	return out, nil
}

// List returns namespace's templates, by name: one row each, its default
// tag, or its newest tag when the default was removed.
func (c *Catalog) List(ctx context.Context, namespace string) ([]*Published, error) {
	items, _, err := c.snapshot(ctx)
	if err != nil {
		return nil, err
	}
	byID := map[string]*Published{}
	for _, p := range items {
		if p.Namespace != namespace {
			continue
		}
		if q := byID[p.TemplateID]; q == nil || q.Tag != build.DefaultTag && (p.Tag == build.DefaultTag || p.Created.After(q.Created)) {
			byID[p.TemplateID] = p
		}
	}
	out := slices.Collect(maps.Values(byID))
	slices.SortFunc(out, func(a, b *Published) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}
