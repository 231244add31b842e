// Package kubefleet implements e2b.Fleet over sandbox-apiserver's own
// pieces: an e2b create is the same claim a kubectl create makes (through
// sandboxes.Service, so it shows in kubectl get sandboxes at once), and
// reads come from the Service's view of the NodeInventory store.
package kubefleet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	agentsv1beta1 "sigs.k8s.io/agent-sandbox/api/v1beta1"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/inventory"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/sandboxes"
)

// renewTTL is how long a renew this process made is shown over the
// inventory's deadline: two publish intervals, like the Service's own
// recent writes.
const renewTTL = 60 * time.Second

// maxRenewed bounds the renews remembered.
const maxRenewed = 10000

// Store is the inventory read side the fleet needs; *inventory.Store
// implements it.
type Store interface {
	Nodes() []inventory.Node
	Node(name string) (inventory.Node, bool)
	ByID(id, namespace string) (inventory.Entry, bool)
}

// Config configures a Fleet.
type Config struct {
	Service *sandboxes.Service
	Store   Store
	// Token is the fleet sandboxd token; it must be the nodes' root
	// api_token, since the surface reads claim tokens with it.
	Token string
	// NodeTimeout bounds a direct node call; default 10 s.
	NodeTimeout time.Duration
	Now         func() time.Time
}

// Fleet is the Kubernetes-backed e2b.Fleet.
type Fleet struct {
	cfg Config

	mu      sync.Mutex
	renewed map[string]renewal // by canonical id
}

type renewal struct {
	deadline, at time.Time
}

var (
	_ e2b.Fleet      = (*Fleet)(nil)
	_ e2b.NodeLister = (*Fleet)(nil)
)

// New builds a Fleet.
func New(cfg Config) (*Fleet, error) {
	if cfg.Service == nil || cfg.Store == nil {
		return nil, errors.New("kubefleet: Service and Store are required")
	}
	if cfg.NodeTimeout <= 0 {
		cfg.NodeTimeout = 10 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Fleet{cfg: cfg, renewed: map[string]renewal{}}, nil
}

func (f *Fleet) client(addr string) (*sandboxd.Client, error) {
	return sandboxd.New(addr, sandboxd.WithToken(f.cfg.Token))
}

// Claim implements e2b.Fleet: it builds the Sandbox a kubectl create
// would (template, net, size and ttl-seconds annotations), creates it
// through the Service, then reads the claim token back from the owning
// node with the root token.
func (f *Fleet) Claim(ctx context.Context, req e2b.ClaimRequest) (e2b.Claimed, error) {
	key := req.Key.WithDefaults()
	in := &agentsv1beta1.Sandbox{}
	in.Namespace, in.Name = req.Namespace, req.Name
	in.Annotations = map[string]string{
		sandbox.AnnotationTemplate:   key.Template,
		sandbox.AnnotationNet:        key.Net,
		sandbox.AnnotationSize:       key.Size,
		sandbox.AnnotationTTLSeconds: strconv.Itoa(max(req.TTLSeconds, 0)),
	}
	out, err := f.cfg.Service.Create(ctx, in)
	if err != nil {
		return e2b.Claimed{}, translate(err)
	}
	sb, err := f.toSandbox(out)
	if err != nil {
		f.abandon(req.Namespace, req.Name)
		return e2b.Claimed{}, err
	}
	sb.Key = key
	cl, err := f.client(sb.NodeAddr)
	if err != nil {
		f.abandon(req.Namespace, req.Name)
		return e2b.Claimed{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, f.cfg.NodeTimeout)
	row, err := cl.Sandbox(callCtx, sb.ID)
	cancel()
	if err == nil && row.Token == "" {
		err = errors.New("kubefleet: the node answered without the sandbox's token; --sandboxd-token must be the nodes' root api_token")
	}
	if err != nil {
		f.abandon(req.Namespace, req.Name)
		return e2b.Claimed{}, fmt.Errorf("reading the claim token of %s: %w", sb.ID, err)
	}
	return e2b.Claimed{Sandbox: sb, ClaimToken: row.Token}, nil
}

// abandon releases a claim the surface cannot hand out.
func (f *Fleet) abandon(namespace, name string) {
	ctx, cancel := context.WithTimeout(context.Background(), f.cfg.NodeTimeout)
	defer cancel()
	_, _ = f.cfg.Service.Delete(ctx, namespace, name)
}

// toSandbox reads the fleet view out of a served Sandbox object.
func (f *Fleet) toSandbox(obj *agentsv1beta1.Sandbox) (e2b.Sandbox, error) {
	ann := obj.Annotations
	id, ok := sandbox.CanonicalID(ann[sandbox.AnnotationID])
	if !ok {
		return e2b.Sandbox{}, fmt.Errorf("kubefleet: sandbox %s/%s carries no sandboxd id", obj.Namespace, obj.Name)
	}
	sb := e2b.Sandbox{
		ID: id, Namespace: obj.Namespace, Name: obj.Name,
		ClaimedAt: obj.CreationTimestamp.Time,
		Paused:    obj.Spec.OperatingMode == agentsv1beta1.SandboxOperatingModeSuspended,
	}
	if key, ok := sandbox.PoolKeyOf(ann, ""); ok {
		sb.Key = key
		if ann[sandbox.AnnotationSize] == "" {
			sb.Key.Size = "" // not published: the inventory carries no size
		}
	}
	if obj.Spec.ShutdownTime != nil {
		sb.Deadline = obj.Spec.ShutdownTime.Time
	}
	// The node's address: the entry's owner address when the inventory
	// has it, else the node's own.
	if e, ok := f.cfg.Store.ByID(id, obj.Namespace); ok && e.Address != "" {
		sb.NodeAddr = e.Address
	} else if n, ok := f.cfg.Store.Node(ann[sandbox.AnnotationNode]); ok {
		sb.NodeAddr = n.Address
	}
	if sb.NodeAddr == "" {
		return e2b.Sandbox{}, fmt.Errorf("kubefleet: the node of %s publishes no address: %w", id, sandboxd.ErrUnavailable)
	}
	f.applyRenewal(&sb)
	return sb, nil
}

func (f *Fleet) applyRenewal(sb *e2b.Sandbox) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.renewed[sb.ID]; ok {
		if f.cfg.Now().Sub(r.at) < renewTTL {
			sb.Deadline = r.deadline
		} else {
			delete(f.renewed, sb.ID)
		}
	}
}

// List implements e2b.Fleet.
func (f *Fleet) List(ctx context.Context, namespace string) ([]e2b.Sandbox, error) {
	objs, _, err := f.cfg.Service.List(ctx, namespace)
	if err != nil {
		return nil, translate(err)
	}
	out := make([]e2b.Sandbox, 0, len(objs))
	for i := range objs {
		sb, err := f.toSandbox(&objs[i])
		if err != nil {
			continue // not addressable yet; the next publish fixes it
		}
		out = append(out, sb)
	}
	return out, nil
}

// Get implements e2b.Fleet: the inventory's id index names the object,
// and the Service's view of it includes this replica's recent writes; a
// sandbox the inventory does not show yet (just created here) is found in
// the Service's list.
func (f *Fleet) Get(ctx context.Context, namespace, id string) (e2b.Sandbox, error) {
	canon, ok := sandbox.CanonicalID(id)
	if !ok || namespace == "" {
		return e2b.Sandbox{}, e2b.ErrNotFound
	}
	if e, ok := f.cfg.Store.ByID(canon, namespace); ok && e.ObjectName != "" {
		obj, err := f.cfg.Service.Get(ctx, namespace, e.ObjectName)
		if err == nil && obj.Annotations[sandbox.AnnotationID] == canon {
			return f.toSandbox(obj)
		}
	}
	all, err := f.List(ctx, namespace)
	if err != nil {
		return e2b.Sandbox{}, err
	}
	for _, sb := range all {
		if sb.ID == canon {
			return sb, nil
		}
	}
	return e2b.Sandbox{}, e2b.ErrNotFound
}

// Release implements e2b.Fleet.
func (f *Fleet) Release(ctx context.Context, sb e2b.Sandbox) error {
	_, err := f.cfg.Service.Delete(ctx, sb.Namespace, sb.Name)
	f.mu.Lock()
	delete(f.renewed, sb.ID)
	f.mu.Unlock()
	return translate(err)
}

// Pause implements e2b.Fleet.
func (f *Fleet) Pause(ctx context.Context, sb e2b.Sandbox) error {
	_, err := f.cfg.Service.Pause(ctx, sb.Namespace, sb.Name)
	return translate(err)
}

// Resume implements e2b.Fleet.
func (f *Fleet) Resume(ctx context.Context, sb e2b.Sandbox) error {
	_, err := f.cfg.Service.Resume(ctx, sb.Namespace, sb.Name)
	return translate(err)
}

// Renew implements e2b.Fleet: sandboxd renew on the owning node; the new
// deadline is shown until the node publishes it.
func (f *Fleet) Renew(ctx context.Context, sb e2b.Sandbox, ttlSeconds int) (time.Time, error) {
	cl, err := f.client(sb.NodeAddr)
	if err != nil {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, f.cfg.NodeTimeout)
	defer cancel()
	deadline, err := cl.Renew(ctx, sb.ID, ttlSeconds)
	if err != nil {
		if errors.Is(err, sandboxd.ErrNotFound) {
			return time.Time{}, fmt.Errorf("%w: %w", e2b.ErrNotFound, err)
		}
		return time.Time{}, err
	}
	now := f.cfg.Now()
	f.mu.Lock()
	if len(f.renewed) >= maxRenewed {
		for id, r := range f.renewed {
			if now.Sub(r.at) >= renewTTL || len(f.renewed) >= maxRenewed {
				delete(f.renewed, id)
			}
		}
	}
	f.renewed[sb.ID] = renewal{deadline: deadline, at: now}
	f.mu.Unlock()
	return deadline, nil
}

// Node implements e2b.Fleet.
func (f *Fleet) Node(sb e2b.Sandbox) (*sandboxd.Client, error) { return f.client(sb.NodeAddr) }

// Nodes implements e2b.NodeLister: every fresh node that publishes an
// address.
func (f *Fleet) Nodes(context.Context) ([]*sandboxd.Client, error) {
	var out []*sandboxd.Client
	for _, n := range f.cfg.Store.Nodes() {
		if n.Address == "" {
			continue
		}
		cl, err := f.client(n.Address)
		if err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}

// translate maps the Service's Kubernetes status errors onto the errors
// the e2b surface branches on.
func translate(err error) error {
	if err == nil {
		return nil
	}
	var status apierrors.APIStatus
	msg := err.Error()
	if errors.As(err, &status) {
		msg = status.Status().Message
	}
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("%w: %s", e2b.ErrNotFound, msg)
	case apierrors.IsTooManyRequests(err):
		return fmt.Errorf("%s: %w", msg, sandboxd.ErrCapacity)
	case apierrors.IsBadRequest(err):
		return fmt.Errorf("%s: %w", msg, sandboxd.ErrBadRequest)
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return fmt.Errorf("%s: %w", msg, sandboxd.ErrConflict)
	case apierrors.IsServiceUnavailable(err), apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return fmt.Errorf("%s: %w", msg, sandboxd.ErrUnavailable)
	}
	return err
}
