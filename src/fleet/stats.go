package fleet

import (
	"context"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// Stats reads sb's resource usage off its node (GET /v1/sandboxes/{id}/stats):
// its vCPUs and memory. A sandbox its node no longer holds wraps
// ErrNotFound.
func (f *Fleet) Stats(ctx context.Context, sb Sandbox) (*sandboxd.Stats, error) {
	var st *sandboxd.Stats
	err := f.call(ctx, sb, "read stats", func(ctx context.Context, c *sandboxd.Client) error {
		var err error
		st, err = c.Stats(ctx, sb.ID)
		return err
	})
	return st, err
}
