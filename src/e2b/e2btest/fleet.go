// Package e2btest is a small e2b.Fleet straight over sandboxd nodes (the
// simulator in tests), with the contract's namespace scoping done through
// claim_ref "<namespace>/<name>". It stands in for the Kubernetes fleet in
// the surface's own tests and benchmarks.
package e2btest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/e2b"
	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Fleet calls every node with the root token.
type Fleet struct {
	// Addrs are the nodes' sandboxd addresses; claims go to the first and
	// follow its redirects.
	Addrs func() []string
	Token string
}

var (
	_ e2b.Fleet      = (*Fleet)(nil)
	_ e2b.NodeLister = (*Fleet)(nil)
)

func (f *Fleet) client(addr string) (*sandboxd.Client, error) {
	return sandboxd.New(addr, sandboxd.WithToken(f.Token))
}

// Claim implements e2b.Fleet.
func (f *Fleet) Claim(ctx context.Context, req e2b.ClaimRequest) (e2b.Claimed, error) {
	addrs := f.Addrs()
	if len(addrs) == 0 {
		return e2b.Claimed{}, fmt.Errorf("no nodes: %w", sandboxd.ErrCapacity)
	}
	cl, err := f.client(addrs[0])
	if err != nil {
		return e2b.Claimed{}, err
	}
	key := req.Key.WithDefaults()
	claim, err := cl.Claim(ctx, sandboxd.ClaimRequest{
		Template: key.Template, Net: key.Net, Size: key.Size, TTLSeconds: req.TTLSeconds,
		ClaimRef: req.Namespace + "/" + req.Name,
	})
	if err != nil {
		return e2b.Claimed{}, err
	}
	id, _ := sandbox.CanonicalID(claim.ID)
	now := time.Now()
	return e2b.Claimed{
		Sandbox: e2b.Sandbox{
			ID: id, Namespace: req.Namespace, Name: req.Name, Key: key,
			NodeAddr: claim.OwnerAddr, ClaimedAt: now, Deadline: claim.Deadline,
		},
		ClaimToken: claim.Token,
	}, nil
}

// List implements e2b.Fleet.
func (f *Fleet) List(ctx context.Context, namespace string) ([]e2b.Sandbox, error) {
	var out []e2b.Sandbox
	for _, addr := range f.Addrs() {
		cl, err := f.client(addr)
		if err != nil {
			return nil, err
		}
		rows, err := cl.Sandboxes(ctx, "")
		if err != nil {
			return nil, err
		}
		for _, row := range rows {
			if sb, ok := toSandbox(addr, row); ok && (namespace == "" || sb.Namespace == namespace) {
				out = append(out, sb)
			}
		}
	}
	return out, nil
}

func toSandbox(addr string, row sandboxd.Sandbox) (e2b.Sandbox, bool) {
	ns, name, ok := strings.Cut(row.ClaimRef, "/")
	if !ok {
		return e2b.Sandbox{}, false
	}
	id, ok := sandbox.CanonicalID(row.ID)
	if !ok {
		return e2b.Sandbox{}, false
	}
	sb := e2b.Sandbox{
		ID: id, Namespace: ns, Name: name, Key: row.Key, NodeAddr: addr,
		Deadline: row.Deadline, Paused: row.Hibernated,
	}
	if row.ClaimedAt != nil {
		sb.ClaimedAt = *row.ClaimedAt
	}
	return sb, true
}

// Get implements e2b.Fleet.
func (f *Fleet) Get(ctx context.Context, namespace, id string) (e2b.Sandbox, error) {
	canon, ok := sandbox.CanonicalID(id)
	if !ok {
		return e2b.Sandbox{}, e2b.ErrNotFound
	}
	for _, addr := range f.Addrs() {
		cl, err := f.client(addr)
		if err != nil {
			return e2b.Sandbox{}, err
		}
		row, err := cl.Sandbox(ctx, canon)
		if errors.Is(err, sandboxd.ErrNotFound) {
			continue
		}
		if err != nil {
			return e2b.Sandbox{}, err
		}
		sb, ok := toSandbox(addr, *row)
		if !ok || sb.Namespace != namespace {
			return e2b.Sandbox{}, e2b.ErrNotFound
		}
		return sb, nil
	}
	return e2b.Sandbox{}, e2b.ErrNotFound
}

func (f *Fleet) verb(ctx context.Context, sb e2b.Sandbox, fn func(*sandboxd.Client, context.Context, string) error) error {
	cl, err := f.Node(sb)
	if err != nil {
		return err
	}
	err = fn(cl, ctx, sb.ID)
	if errors.Is(err, sandboxd.ErrNotFound) {
		return fmt.Errorf("%w: %w", e2b.ErrNotFound, err)
	}
	return err
}

// Release implements e2b.Fleet.
func (f *Fleet) Release(ctx context.Context, sb e2b.Sandbox) error {
	return f.verb(ctx, sb, (*sandboxd.Client).Release)
}

// Pause implements e2b.Fleet.
func (f *Fleet) Pause(ctx context.Context, sb e2b.Sandbox) error {
	return f.verb(ctx, sb, (*sandboxd.Client).Hibernate)
}

// Resume implements e2b.Fleet.
func (f *Fleet) Resume(ctx context.Context, sb e2b.Sandbox) error {
	return f.verb(ctx, sb, (*sandboxd.Client).Wake)
}

// Renew implements e2b.Fleet.
func (f *Fleet) Renew(ctx context.Context, sb e2b.Sandbox, ttlSeconds int) (time.Time, error) {
	cl, err := f.Node(sb)
	if err != nil {
		return time.Time{}, err
	}
	return cl.Renew(ctx, sb.ID, ttlSeconds)
}

// Node implements e2b.Fleet.
func (f *Fleet) Node(sb e2b.Sandbox) (*sandboxd.Client, error) { return f.client(sb.NodeAddr) }

// Nodes implements e2b.NodeLister.
func (f *Fleet) Nodes(context.Context) ([]*sandboxd.Client, error) {
	var out []*sandboxd.Client
	for _, addr := range f.Addrs() {
		cl, err := f.client(addr)
		if err != nil {
			return nil, err
		}
		out = append(out, cl)
	}
	return out, nil
}
