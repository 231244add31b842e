package fleet

import (
	"context"
	"fmt"
	"sync"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// nodeFanout bounds the nodes a read of every node asks at once, so one
// read of a large fleet holds a bounded number of connections.
const nodeFanout = 16

// NodeSandboxes is the node at addr's sandbox index (GET /v1/sandboxes):
// every sandbox it holds, with its claim labels.
func (f *Fleet) NodeSandboxes(ctx context.Context, addr string) ([]sandboxd.Sandbox, error) {
	var rows []sandboxd.Sandbox
	err := f.onNode(ctx, addr, "list sandboxes", func(ctx context.Context, c *sandboxd.Client) error {
		var err error
		rows, err = c.Sandboxes(ctx, "")
		return err
	})
	return rows, err
}

// onNode runs one call on the node at addr within NodeTimeout. Unlike
// call it is about a node, not a sandbox the view placed there, and a node
// that does not answer it is not reported to the view: these are a
// front's reads of every node and its template writes, and one slow
// catalog read must not take a node out of the mesh's claims.
func (f *Fleet) onNode(ctx context.Context, addr, op string, verb func(context.Context, *sandboxd.Client) error) error {
	c, err := f.Client(addr)
	if err != nil {
		return fmt.Errorf("fleet: %s: %w: %w", op, sandboxd.ErrUnavailable, err)
	}
	callCtx, cancel := context.WithTimeout(ctx, f.cfg.NodeTimeout)
	defer cancel()
	if err := verb(callCtx, c); err != nil {
		return fmt.Errorf("fleet: %s at node %s: %w", op, addr, err)
	}
	return nil
}

// nodeResult is one node's answer to a read of every node.
type nodeResult[T any] struct {
	addr string
	val  T
	err  error
}

// eachNode runs read on every node that may take claims, at most
// nodeFanout at once, each within NodeTimeout (see onNode), and answers
// one result per node in the view's order. A node that fails is its own
// result's err, so the caller can tell a partial read from a whole one.
func eachNode[T any](ctx context.Context, f *Fleet, op string, read func(context.Context, *sandboxd.Client) (T, error)) []nodeResult[T] {
	var addrs []string
	for _, n := range f.cfg.View.Nodes() {
		if n.Addr != "" {
			addrs = append(addrs, n.Addr)
		}
	}
	out := make([]nodeResult[T], len(addrs))
	slots := make(chan struct{}, nodeFanout)
	var wg sync.WaitGroup
	for i, addr := range addrs {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			out[i].addr = addr
			out[i].err = f.onNode(ctx, addr, op, func(ctx context.Context, c *sandboxd.Client) error {
				var err error
				out[i].val, err = read(ctx, c)
				return err
			})
		})
	}
	wg.Wait()
	return out
}
