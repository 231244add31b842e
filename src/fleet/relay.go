package fleet

import (
	"context"
	"fmt"
	"net"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// DialPort opens a connection to port inside sb through its node's
// guest-port relay, under token (the sandbox's own or the root token). The
// relay handshake is a call to the node like any other, so it is bounded by
// NodeTimeout and a node that does not answer it is reported to the view:
// a node that hangs between a claim and the first use of the sandbox then
// costs one node timeout, not the caller's whole deadline. The connection,
// once open, is the caller's.
func (f *Fleet) DialPort(ctx context.Context, sb Sandbox, token string, port int) (net.Conn, error) {
	c, err := f.Client(sb.NodeAddr)
	if err != nil {
		return nil, fmt.Errorf("fleet: dial port %d of %s: %w: %w", port, sb.ID, sandboxd.ErrUnavailable, err)
	}
	dialCtx, cancel := context.WithTimeout(ctx, f.cfg.NodeTimeout)
	defer cancel()
	conn, err := c.As(token).DialPort(dialCtx, sb.ID, port)
	if err != nil {
		if unreachable(ctx, err) && f.rec != nil {
			f.rec.Unreachable(sb.NodeAddr, err)
		}
		return nil, fmt.Errorf("fleet: dial port %d of %s: %w", port, sb.ID, err)
	}
	return conn, nil
}
