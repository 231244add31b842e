package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/apiserver/registry"
)

// memBackend is an in-memory registry.Backend: a test double for the backend
// boundary (the real one reads node inventory and calls sandboxd). It keeps
// a bounded event history so watches can resume and expire like the real
// backend's, and records the subresource calls it receives.
type memBackend struct {
	mu       sync.Mutex
	rev      registry.Revision
	items    map[string]*agentsv1beta1.Sandbox
	history  []registry.Event
	oldest   registry.Revision // history starts after this revision
	watchers map[*memWatcher]struct{}

	// failures maps an operation name to the error it answers next.
	failures map[string]error
	calls    []string
	fork     forkCall
	snapshot string
}

type forkCall struct {
	namespace, name string
	count           int
	ttlSeconds      int64
}

type memWatcher struct {
	namespace string
	ch        chan registry.Event
}

var _ registry.Backend = &memBackend{}

func newMemBackend() *memBackend {
	return &memBackend{
		items:    map[string]*agentsv1beta1.Sandbox{},
		watchers: map[*memWatcher]struct{}{},
		failures: map[string]error{},
	}
}

func key(ns, name string) string { return ns + "/" + name }

func (b *memBackend) failNext(op string, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures[op] = err
}

// takeFailure must be called with mu held.
func (b *memBackend) takeFailure(op string) error {
	b.calls = append(b.calls, op)
	err := b.failures[op]
	delete(b.failures, op)
	return err
}

func (b *memBackend) callCount(op string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, c := range b.calls {
		if c == op {
			n++
		}
	}
	return n
}

// forgetHistory drops every remembered event, so a watch from an older
// revision expires.
func (b *memBackend) forgetHistory() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.history = nil
	b.oldest = b.rev
}

func notFound(name string) error {
	return apierrors.NewNotFound(agentsv1beta1.Resource("sandboxes"), name)
}

func (b *memBackend) Get(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.takeFailure("get"); err != nil {
		return nil, err
	}
	sb, ok := b.items[key(ns, name)]
	if !ok {
		return nil, notFound(name)
	}
	return sb.DeepCopy(), nil
}

// ListPage ignores paging: the server tests page through the real
// backend (tests/integration/apiserver) and the storage's own tests.
func (b *memBackend) ListPage(_ context.Context, ns string, opts registry.ListOptions) (registry.ListResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.takeFailure("list"); err != nil {
		return registry.ListResult{}, err
	}
	var out []agentsv1beta1.Sandbox
	for _, sb := range b.items {
		if (ns == "" || sb.Namespace == ns) && (opts.Match == nil || opts.Match(sb)) {
			out = append(out, *sb.DeepCopy())
		}
	}
	return registry.ListResult{Items: out, Revision: b.rev}, nil
}

func (b *memBackend) Watch(ctx context.Context, ns string, from registry.Revision) (<-chan registry.Event, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.takeFailure("watch"); err != nil {
		return nil, err
	}
	w := &memWatcher{namespace: ns, ch: make(chan registry.Event, 1024)}
	if from == 0 {
		for _, sb := range b.items {
			if ns == "" || sb.Namespace == ns {
				w.ch <- registry.Event{Type: registry.Added, Sandbox: sb.DeepCopy(), Revision: b.rev}
			}
		}
	} else {
		if from < b.oldest || from > b.rev {
			return nil, apierrors.NewResourceExpired(fmt.Sprintf("revision %d is no longer remembered", from))
		}
		for _, ev := range b.history {
			if ev.Revision > from && (ns == "" || ev.Sandbox.Namespace == ns) {
				w.ch <- ev
			}
		}
	}
	b.watchers[w] = struct{}{}
	go func() {
		<-ctx.Done()
		b.mu.Lock()
		defer b.mu.Unlock()
		if _, ok := b.watchers[w]; ok {
			delete(b.watchers, w)
			close(w.ch)
		}
	}()
	return w.ch, nil
}

// record must be called with mu held.
func (b *memBackend) record(t registry.EventType, sb *agentsv1beta1.Sandbox) {
	ev := registry.Event{Type: t, Sandbox: sb.DeepCopy(), Revision: b.rev}
	b.history = append(b.history, ev)
	for w := range b.watchers {
		if w.namespace != "" && w.namespace != sb.Namespace {
			continue
		}
		select {
		case w.ch <- ev:
		default: // a slow watcher is dropped, as the real backend does
			delete(b.watchers, w)
			close(w.ch)
		}
	}
}

// put stores sb as a new or changed sandbox; mu must be held.
func (b *memBackend) put(sb *agentsv1beta1.Sandbox, t registry.EventType) *agentsv1beta1.Sandbox {
	b.rev++
	sb.ResourceVersion = fmt.Sprint(uint64(b.rev))
	b.items[key(sb.Namespace, sb.Name)] = sb
	b.record(t, sb)
	return sb.DeepCopy()
}

func (b *memBackend) Create(_ context.Context, in *agentsv1beta1.Sandbox) (*agentsv1beta1.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.takeFailure("create"); err != nil {
		return nil, err
	}
	if _, ok := b.items[key(in.Namespace, in.Name)]; ok {
		return nil, apierrors.NewAlreadyExists(agentsv1beta1.Resource("sandboxes"), in.Name)
	}
	return b.put(claimed(in.DeepCopy(), "node-a"), registry.Added), nil
}

// claimed fills in what a node reports about a fresh claim.
func claimed(sb *agentsv1beta1.Sandbox, node string) *agentsv1beta1.Sandbox {
	sb.UID = types.UID("uid-" + sb.Namespace + "-" + sb.Name)
	sb.CreationTimestamp = metav1.NewTime(time.Now().Add(-72 * time.Hour))
	if sb.Annotations == nil {
		sb.Annotations = map[string]string{}
	}
	sb.Annotations["sandbox.cocoonstack.io/phase"] = "Running"
	sb.Annotations["sandbox.cocoonstack.io/template"] = "python-3.12"
	sb.Annotations["sandbox.cocoonstack.io/deadline"] = "2030-01-02T03:04:05Z"
	sb.Status.NodeName = node
	return sb
}

func (b *memBackend) Delete(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.takeFailure("delete"); err != nil {
		return nil, err
	}
	sb, ok := b.items[key(ns, name)]
	if !ok {
		return nil, notFound(name)
	}
	delete(b.items, key(ns, name))
	b.rev++
	sb.ResourceVersion = fmt.Sprint(uint64(b.rev))
	b.record(registry.Deleted, sb)
	return sb.DeepCopy(), nil
}

func (b *memBackend) setPhase(op, ns, name, phase string) (*agentsv1beta1.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.takeFailure(op); err != nil {
		return nil, err
	}
	sb, ok := b.items[key(ns, name)]
	if !ok {
		return nil, notFound(name)
	}
	sb = sb.DeepCopy()
	sb.Annotations["sandbox.cocoonstack.io/phase"] = phase
	return b.put(sb, registry.Modified), nil
}

func (b *memBackend) Pause(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	return b.setPhase("pause", ns, name, "Hibernated")
}

func (b *memBackend) Resume(_ context.Context, ns, name string) (*agentsv1beta1.Sandbox, error) {
	return b.setPhase("resume", ns, name, "Running")
}

func (b *memBackend) Fork(_ context.Context, ns, name string, count int, ttlSeconds int64) ([]agentsv1beta1.Sandbox, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.takeFailure("fork"); err != nil {
		return nil, err
	}
	b.fork = forkCall{namespace: ns, name: name, count: count, ttlSeconds: ttlSeconds}
	parent, ok := b.items[key(ns, name)]
	if !ok {
		return nil, notFound(name)
	}
	var children []agentsv1beta1.Sandbox
	for i := 0; i < count; i++ {
		child := &agentsv1beta1.Sandbox{}
		child.Namespace = ns
		child.Name = fmt.Sprintf("%s-fork-%d", name, i)
		child.Labels = parent.Labels
		children = append(children, *b.put(claimed(child, parent.Status.NodeName), registry.Added))
	}
	return children, nil
}

func (b *memBackend) Snapshot(_ context.Context, ns, name, snapshotName string) (*registry.SnapshotResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.takeFailure("snapshot"); err != nil {
		return nil, err
	}
	b.snapshot = snapshotName
	sb, ok := b.items[key(ns, name)]
	if !ok {
		return nil, notFound(name)
	}
	return &registry.SnapshotResult{ID: "ck_0001", Name: snapshotName, Node: sb.Status.NodeName, CreatedAt: "2030-01-01T00:00:00Z"}, nil
}
