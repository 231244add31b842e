// Package faultlink simulates the network path to a server, for fault tests: a
// TCP forwarder that can be cut and healed like a network that drops
// packets, while the server behind it keeps running.
package faultlink

import (
	"fmt"
	"net"
	"sync"
)

// Link is the network path to one server, as a TCP forwarder a test can
// cut and heal: everyone who reaches the server through the link's
// address (the server advertises it) loses it while the link is cut,
// while the server itself keeps running and keeps reaching out.
//
// A cut link behaves as a network that drops every packet, not as a
// server that refuses: connections are still accepted (the caller's
// connect returns, as the kernel completes it on a hung server too) and
// what is sent is read, but nothing is delivered either way, no
// connection is opened to the server and none is closed. When the link
// heals, what was held is delivered in order, as TCP's retransmissions
// would after a short partition; a caller that gave up meanwhile closed
// its side, and that close is delivered too.
type Link struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	open   chan struct{} // closed while traffic passes
	cutAt  func([]byte) bool
	wasCut chan struct{} // closed when an armed cut happens
	conns  map[net.Conn]struct{}
	closed chan struct{}
	wg     sync.WaitGroup
}

// Start listens on listen and forwards every connection to target until
// Close. The link starts healed.
func Start(listen, target string) (*Link, error) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, fmt.Errorf("link %s to %s: %w", listen, target, err)
	}
	l := &Link{
		ln: ln, target: target,
		open:   make(chan struct{}),
		conns:  map[net.Conn]struct{}{},
		closed: make(chan struct{}),
	}
	close(l.open)
	l.wg.Go(l.serve)
	return l, nil
}

// Addr is the address the link listens on.
func (l *Link) Addr() string { return l.ln.Addr().String() }

// Cut stops all traffic through the link, on open connections and new
// ones alike.
func (l *Link) Cut() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
		l.open = make(chan struct{})
	default: // already cut
	}
}

// CutAfter arms the link to cut itself right after it delivers to the
// server a chunk that match accepts: the request arrives, its answer is
// held, as when a partition begins while a call is in flight. The
// returned channel is closed at that cut.
func (l *Link) CutAfter(match func(chunk []byte) bool) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cutAt = match
	l.wasCut = make(chan struct{})
	return l.wasCut
}

// cutBefore cuts the link if it is armed and chunk, about to be
// delivered to the server, is the one it waits for. The cut comes before
// the chunk is written so that the server's answer, which may follow the
// write at once, already finds the link cut; the caller still writes this
// one chunk and then closes the returned channel (nil when no cut
// happened) to report the cut.
func (l *Link) cutBefore(chunk []byte) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cutAt == nil || !l.cutAt(chunk) {
		return nil
	}
	l.cutAt = nil
	select {
	case <-l.open:
		l.open = make(chan struct{})
	default:
	}
	return l.wasCut
}

// Heal lets traffic pass again, what was held first.
func (l *Link) Heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.open:
	default:
		close(l.open)
	}
}

// pass blocks while the link is cut; false means the link is closing.
func (l *Link) pass() bool {
	l.mu.Lock()
	open := l.open
	l.mu.Unlock()
	select {
	case <-open:
		return true
	case <-l.closed:
		return false
	}
}

func (l *Link) serve() {
	for {
		c, err := l.ln.Accept()
		if err != nil {
			return
		}
		if !l.track(c) {
			return
		}
		l.wg.Go(func() { l.forward(c) })
	}
}

// track records c so that close can end it; false when the link is
// already closing (c is closed then).
func (l *Link) track(c net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	select {
	case <-l.closed:
		c.Close()
		return false
	default:
		l.conns[c] = struct{}{}
		return true
	}
}

func (l *Link) untrack(c net.Conn) {
	l.mu.Lock()
	delete(l.conns, c)
	l.mu.Unlock()
	c.Close()
}

// forward connects c to the target once the link passes traffic, then
// copies both ways.
func (l *Link) forward(c net.Conn) {
	defer l.untrack(c)
	if !l.pass() {
		return
	}
	s, err := net.Dial("tcp", l.target)
	if err != nil {
		return
	}
	if !l.track(s) {
		return
	}
	defer l.untrack(s)
	var wg sync.WaitGroup
	wg.Go(func() { l.copy(s, c, true) })
	l.copy(c, s, false)
	wg.Wait()
}

// copy moves bytes from src to dst, each chunk only while the link
// passes traffic, and half-closes dst when src ends. toServer marks the
// direction an armed cut watches.
func (l *Link) copy(dst, src net.Conn, toServer bool) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if !l.pass() {
				return
			}
			var cut chan struct{}
			if toServer {
				cut = l.cutBefore(buf[:n])
			}
			_, werr := dst.Write(buf[:n])
			if cut != nil {
				close(cut)
			}
			if werr != nil {
				// The other direction may be blocked reading from dst.
				dst.Close()
				return
			}
		}
		if err != nil {
			if !l.pass() {
				return
			}
			if tc, ok := dst.(*net.TCPConn); ok {
				_ = tc.CloseWrite()
			} else {
				dst.Close()
			}
			return
		}
	}
}

// Close stops the link: the listener, then every connection through it.
// It waits for the link's goroutines.
func (l *Link) Close() {
	l.mu.Lock()
	select {
	case <-l.closed:
		l.mu.Unlock()
		return
	default:
	}
	close(l.closed)
	conns := make([]net.Conn, 0, len(l.conns))
	for c := range l.conns {
		conns = append(conns, c)
	}
	l.mu.Unlock()
	l.ln.Close()
	for _, c := range conns {
		c.Close()
	}
	l.wg.Wait()
}
