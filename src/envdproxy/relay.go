package envdproxy

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// dialRelay opens the guest-port relay to t through node and reports the
// dial to the observer. A relay it returns is reported open, and counts
// the bytes it carries; its caller closes it and then reports it closed.
func (p *Proxy) dialRelay(ctx context.Context, node *sandboxd.Client, t Target) (sandboxd.RelayConn, error) {
	start := p.cfg.Clock.Now()
	conn, err := node.DialPort(ctx, t.ID, t.Port)
	took := p.cfg.Clock.Since(start)
	if err != nil {
		p.cfg.Observer.ObserveDial(took, dialFailureOf(err))
		return nil, err
	}
	p.cfg.Observer.ObserveDial(took, NoDialFailure)
	p.cfg.Observer.ObserveRelayOpened()
	return &countedConn{RelayConn: conn, obs: p.cfg.Observer}, nil
}

// dialFailureOf sorts a DialPort error into its cause. The connect comes
// first (no answer from the node at all), then the node's own refusals by
// status, then running out of time in the handshake.
func dialFailureOf(err error) DialFailure {
	if opErr, ok := errors.AsType[*net.OpError](err); ok && opErr.Op == "dial" {
		return DialNodeUnreachable
	}
	if isPausedMessage(err) {
		// Older nodes refused a paused sandbox with 502, the status of
		// an empty guest port: the words tell the two apart.
		return DialRefused
	}
	switch sandboxd.StatusOf(err) {
	case 0: // not an answer of the node's
	case http.StatusBadGateway:
		return DialNotListening
	case http.StatusNotFound:
		return DialSandboxGone
	default:
		return DialRefused
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, os.ErrDeadlineExceeded) {
		return DialTimeout
	}
	if netErr, ok := errors.AsType[net.Error](err); ok && netErr.Timeout() {
		return DialTimeout
	}
	return DialOther
}

// countedConn reports the bytes each read and write of a relay carried.
// It keeps CloseWrite, which the reverse proxy uses to pass a client's
// half-close of an upgraded connection on to the guest.
type countedConn struct {
	sandboxd.RelayConn
	obs Observer
}

func (c *countedConn) Read(b []byte) (int, error) {
	n, err := c.RelayConn.Read(b)
	if n > 0 {
		c.obs.ObserveBytes(FromSandbox, n)
	}
	return n, err
}

func (c *countedConn) Write(b []byte) (int, error) {
	n, err := c.RelayConn.Write(b)
	if n > 0 {
		c.obs.ObserveBytes(ToSandbox, n)
	}
	return n, err
}
