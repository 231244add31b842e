// Package publisher writes a simulated node's NodeInventory to a
// kube-apiserver the way vk-sandbox does on a real node: one object per node,
// named after it, replaced wholesale by server-side apply on a fixed cadence
// and stamped with the time it was built.
//
// A Publisher does not drive the simulator: it calls a Source for the
// inventory to publish, so the simulated node stays free of Kubernetes
// clients. FromSnapshot is the one conversion of a node's Snapshot into
// the NodeInventory it publishes; the simulator's fleet and the tests that
// build inventories without a kube-apiserver both use it.
package publisher

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/clock"

	"github.com/cocoonstack/sandbox-operator/src/apis/nodeinventory/v1beta1"
)

const (
	// DefaultInterval is vk-sandbox's publish cadence. Readers drop a node
	// whose publishedAt trails the fleet by more than their stale window
	// (90 s by default), so this leaves room for two missed publishes.
	DefaultInterval = 30 * time.Second

	// DefaultFieldManager names the simulator as the owner of the fields it
	// applies, distinct from vk-sandbox's own manager name.
	DefaultFieldManager = "sandboxd-sim"
)

// Source returns the inventory a node publishes now. Only Node (required),
// Address, Pools and Entries are read, plus the labels, annotations and
// owner references of its ObjectMeta; the publisher sets the object's name,
// type and publishedAt itself. A Source is called once per publish and must
// not keep or mutate the returned object afterwards.
type Source func(ctx context.Context) (*v1beta1.NodeInventory, error)

// Config configures a Publisher.
type Config struct {
	// Client reaches the kube-apiserver. Required.
	Client dynamic.Interface
	// Source supplies the node's current inventory. Required.
	Source Source
	// Interval between publishes; DefaultInterval when zero.
	Interval time.Duration
	// Timeout bounds one publish; Interval when zero, so a hung apiserver
	// never delays the next tick's fresh attempt.
	Timeout time.Duration
	// FieldManager is the server-side apply manager; DefaultFieldManager
	// when empty.
	FieldManager string
	// Clock drives the publish ticker and the publishedAt stamp; the real
	// clock when nil. Tests inject a fake one.
	Clock clock.WithTicker
	// Logger gets failed publishes, and each publish at debug; nil
	// discards.
	Logger *slog.Logger
}

// Publisher keeps one node's NodeInventory current.
type Publisher struct {
	resource     dynamic.NamespaceableResourceInterface
	source       Source
	interval     time.Duration
	timeout      time.Duration
	fieldManager string
	clock        clock.WithTicker
	log          *slog.Logger

	mu       sync.Mutex
	lastNode string // name of the last object applied, for Delete
}

// New validates cfg, fills its defaults and returns a Publisher.
func New(cfg Config) (*Publisher, error) {
	if cfg.Client == nil {
		return nil, errors.New("publisher: Config.Client is required")
	}
	if cfg.Source == nil {
		return nil, errors.New("publisher: Config.Source is required")
	}
	if cfg.Interval < 0 || cfg.Timeout < 0 {
		return nil, fmt.Errorf("publisher: negative interval %v or timeout %v", cfg.Interval, cfg.Timeout)
	}
	p := &Publisher{
		resource:     cfg.Client.Resource(v1beta1.NodeInventoryGVR),
		source:       cfg.Source,
		interval:     cmp.Or(cfg.Interval, DefaultInterval),
		fieldManager: cmp.Or(cfg.FieldManager, DefaultFieldManager),
		clock:        cfg.Clock,
		log:          cfg.Logger,
	}
	p.timeout = cmp.Or(cfg.Timeout, p.interval)
	if p.clock == nil {
		p.clock = clock.RealClock{}
	}
	if p.log == nil {
		p.log = slog.New(slog.DiscardHandler)
	}
	return p, nil
}

// Run publishes immediately and then once per interval until ctx ends. A
// failed publish is logged and retried on the next tick, never fatal: the
// next attempt rebuilds the inventory from live state anyway. Run returns nil
// once ctx is done. It leaves the last inventory in place, as vk-sandbox does,
// so a stopped node goes stale for readers rather than vanishing; call
// Delete to remove it.
func (p *Publisher) Run(ctx context.Context) error {
	ticker := p.clock.NewTicker(p.interval)
	defer ticker.Stop()
	for {
		if err := p.PublishOnce(ctx); err != nil && ctx.Err() == nil {
			p.log.Error("NodeInventory publish failed; retrying on the next tick", "err", err, "interval", p.interval)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ticker.C():
		}
	}
}

// PublishOnce reads the Source and applies the resulting NodeInventory,
// stamped with the current time, taking ownership of every field it sends.
func (p *Publisher) PublishOnce(ctx context.Context) error {
	inv, err := p.source(ctx)
	if err != nil {
		return fmt.Errorf("build node inventory: %w", err)
	}
	if inv == nil || inv.Node == "" {
		return errors.New("build node inventory: source returned no node name")
	}
	obj, err := p.applyObject(inv)
	if err != nil {
		return fmt.Errorf("encode node %q inventory: %w", inv.Node, err)
	}

	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	opts := metav1.ApplyOptions{FieldManager: p.fieldManager, Force: true}
	if _, err := p.resource.Apply(ctx, inv.Node, obj, opts); err != nil {
		return fmt.Errorf("apply node %q inventory: %w", inv.Node, err)
	}

	p.mu.Lock()
	p.lastNode = inv.Node
	p.mu.Unlock()
	p.log.Debug("published NodeInventory", "node", inv.Node, "pools", len(inv.Pools), "entries", len(inv.Entries))
	return nil
}

// applyObject builds the apply body: the full object, since every field the
// publisher omits is one it gives up, and the lists are atomic.
func (p *Publisher) applyObject(inv *v1beta1.NodeInventory) (*unstructured.Unstructured, error) {
	now := metav1.NewTime(p.clock.Now())
	out := &v1beta1.NodeInventory{
		TypeMeta: metav1.TypeMeta{
			APIVersion: v1beta1.SchemeGroupVersion.String(),
			Kind:       v1beta1.NodeInventoryKind,
		},
		ObjectMeta: metav1.ObjectMeta{
			Name:            inv.Node,
			Labels:          inv.Labels,
			Annotations:     inv.Annotations,
			OwnerReferences: inv.OwnerReferences,
		},
		Node:        inv.Node,
		Address:     inv.Address,
		PublishedAt: &now,
		Pools:       inv.Pools,
		Entries:     slices.Clone(inv.Entries),
	}
	// Readers rely on entries arriving sorted by name (a published promise
	// of the API), whatever order the source produced them in.
	slices.SortFunc(out.Entries, func(a, b v1beta1.InventoryEntry) int { return cmp.Compare(a.Name, b.Name) })

	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(out)
	if err != nil {
		return nil, err
	}
	// A zero creationTimestamp encodes as null; leave it to the apiserver.
	unstructured.RemoveNestedField(content, "metadata", "creationTimestamp")
	return &unstructured.Unstructured{Object: content}, nil
}

// Delete removes the NodeInventory this publisher last applied, for a node
// the simulator takes out of the fleet on purpose. It is a no-op when nothing
// was published or the object is already gone.
func (p *Publisher) Delete(ctx context.Context) error {
	p.mu.Lock()
	node := p.lastNode
	p.mu.Unlock()
	if node == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if err := p.resource.Delete(ctx, node, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete node %q inventory: %w", node, err)
	}
	return nil
}
