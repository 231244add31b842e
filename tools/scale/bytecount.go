package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// byteCounter is a loopback TCP proxy that forwards every connection to
// one target and counts the bytes in each direction. It does not look into
// the stream, so TLS passes through untouched and the client verifies the
// target's certificate as if it had dialled it.
type byteCounter struct {
	ln     net.Listener
	target string

	// up is client→target, down target→client.
	up, down atomic.Int64

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
	wg     sync.WaitGroup
}

// dialTimeout bounds the proxy's dial of the target.
const dialTimeout = 10 * time.Second

// startByteCounter listens on a free loopback port and forwards to target
// (host:port).
func startByteCounter(target string) (*byteCounter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("byte counter: %w", err)
	}
	b := &byteCounter{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	b.wg.Go(b.serve)
	return b, nil
}

// Addr is the host:port clients dial instead of the target.
func (b *byteCounter) Addr() string { return b.ln.Addr().String() }

// Reset zeroes both counters.
func (b *byteCounter) Reset() {
	b.up.Store(0)
	b.down.Store(0)
}

// Read returns the bytes counted since the last Reset: up is what clients
// sent, down what the target sent back. A byte is counted once the proxy
// has read it and before it forwards it, so everything a client has
// received is in down.
func (b *byteCounter) Read() (up, down int64) { return b.up.Load(), b.down.Load() }

// Close stops accepting, closes every proxied connection and waits for the
// copying to end.
func (b *byteCounter) Close() error {
	b.mu.Lock()
	b.closed = true
	for c := range b.conns {
		c.Close()
	}
	b.mu.Unlock()
	err := b.ln.Close()
	b.wg.Wait()
	return err
}

func (b *byteCounter) serve() {
	for {
		c, err := b.ln.Accept()
		if err != nil {
			return // closed
		}
		if !b.track(c) {
			c.Close()
			return
		}
		b.wg.Go(func() { b.proxy(c) })
	}
}

// track registers c for Close; false once the counter is closed.
func (b *byteCounter) track(c net.Conn) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return false
	}
	b.conns[c] = struct{}{}
	return true
}

func (b *byteCounter) untrack(c net.Conn) {
	b.mu.Lock()
	delete(b.conns, c)
	b.mu.Unlock()
	c.Close()
}

// proxy copies between client and a fresh connection to the target until
// both directions end.
func (b *byteCounter) proxy(client net.Conn) {
	defer b.untrack(client)
	server, err := net.DialTimeout("tcp", b.target, dialTimeout)
	if err != nil {
		return
	}
	if !b.track(server) {
		server.Close()
		return
	}
	defer b.untrack(server)
	var wg sync.WaitGroup
	wg.Go(func() { pipe(server, client, &b.up) })
	wg.Go(func() { pipe(client, server, &b.down) })
	wg.Wait()
}

// pipe copies src to dst, adding every byte read to n, and half-closes dst
// when src ends (or closes it on an error, which ends the other direction
// too).
func pipe(dst, src net.Conn, n *atomic.Int64) {
	buf := make([]byte, 64<<10)
	for {
		k, err := src.Read(buf)
		if k > 0 {
			n.Add(int64(k))
			if _, werr := dst.Write(buf[:k]); werr != nil {
				dst.Close()
				src.Close()
				return
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				if cw, ok := dst.(interface{ CloseWrite() error }); ok {
					_ = cw.CloseWrite()
					return
				}
			}
			dst.Close()
			src.Close()
			return
		}
	}
}
