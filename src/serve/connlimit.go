package serve

import (
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
)

// DefaultMaxConnsPerClient bounds the connections one client address may
// hold open on a listener when ServerConfig leaves it 0. It is far above
// what an SDK or a browser opens, and still leaves a flood from one
// address short of the process's file descriptors. A deployment that puts
// many clients behind one address (an ingress that does not keep
// connections alive) raises it, or turns it off.
const DefaultMaxConnsPerClient = 1024

// perClient is a listener that lets no client address hold more than max
// connections at once. A connection past the bound is closed before a
// byte of it is read: the flooding client loses its own extra
// connections, and everyone else is served.
type perClient struct {
	net.Listener
	max int
	log *slog.Logger

	mu   sync.Mutex
	open map[netip.Addr]int

	refused atomic.Int64
}

func limitPerClient(ln net.Listener, max int, log *slog.Logger) *perClient {
	return &perClient{Listener: ln, max: max, log: log, open: map[netip.Addr]int{}}
}

// Accept returns the next connection within the bound, closing the ones
// past it.
func (l *perClient) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		addr := clientAddr(c)
		l.mu.Lock()
		if l.open[addr] >= l.max {
			l.mu.Unlock()
			if l.refused.Add(1)%1000 == 1 {
				// Once per thousand, not per connection: a flood must
				// not flood the log too.
				l.log.Warn("closing connections past the per-client bound", "client", addr.String(), "bound", l.max, "closedSoFar", l.refused.Load())
			}
			_ = c.Close()
			continue
		}
		l.open[addr]++
		l.mu.Unlock()
		return &countedConn{Conn: c, done: sync.OnceFunc(func() { l.release(addr) })}, nil
	}
}

func (l *perClient) release(addr netip.Addr) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.open[addr]--; l.open[addr] <= 0 {
		delete(l.open, addr)
	}
}

// clientAddr is the connection's remote IP; connections that are not TCP
// share the zero address.
func clientAddr(c net.Conn) netip.Addr {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.AddrPort().Addr().Unmap()
	}
	return netip.Addr{}
}

// countedConn gives its client's slot back when closed.
type countedConn struct {
	net.Conn
	done func()
}

func (c *countedConn) Close() error {
	err := c.Conn.Close()
	c.done()
	return err
}

// CloseWrite half-closes the connection when the underlying one can, so
// wrapping does not hide it from the relays that use it.
func (c *countedConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return errors.ErrUnsupported
}
