package isolate

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"time"
)

// The relay protocol, per unix-socket connection: the host sends the port as
// two bytes (big endian); the init dials 127.0.0.1:port in the sandbox's
// network namespace and answers one status byte, followed for a failure by
// a two-byte length and the error text. After a success the connection
// carries the TCP stream both ways, half-closes included.
const (
	relayOK   = 0
	relayFail = 1

	// relayDialTimeout bounds the inside dial; loopback either answers at
	// once or the listener's backlog is full.
	relayDialTimeout = 5 * time.Second
)

// serveRelay accepts relay connections until the listener fails (it lives as
// long as the init).
func serveRelay(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go relayOne(c)
	}
}

func relayOne(c net.Conn) {
	defer c.Close()
	var hdr [2]byte
	_ = c.SetReadDeadline(time.Now().Add(relayDialTimeout))
	if _, err := io.ReadFull(c, hdr[:]); err != nil {
		return
	}
	_ = c.SetReadDeadline(time.Time{})
	port := int(binary.BigEndian.Uint16(hdr[:]))
	t, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), relayDialTimeout)
	if err != nil {
		msg := err.Error()
		if len(msg) > 1024 {
			msg = msg[:1024]
		}
		buf := []byte{relayFail, 0, 0}
		binary.BigEndian.PutUint16(buf[1:], uint16(len(msg)))
		_, _ = c.Write(append(buf, msg...))
		return
	}
	defer t.Close()
	if _, err := c.Write([]byte{relayOK}); err != nil {
		return
	}
	splice(c, t)
}

// halfCloser is what both ends (unix and TCP) offer to pass on an EOF.
type halfCloser interface{ CloseWrite() error }

// splice copies both ways and passes each EOF on as a half-close, returning
// when both directions are done.
func splice(a, b net.Conn) {
	var wg sync.WaitGroup
	copyHalf := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if hc, ok := dst.(halfCloser); ok && err == nil {
			_ = hc.CloseWrite()
		} else {
			// A reset on one side resets the other.
			_ = dst.Close()
			_ = src.Close()
		}
	}
	wg.Add(2)
	go copyHalf(a, b)
	go copyHalf(b, a)
	wg.Wait()
}

// Dial connects to 127.0.0.1:port inside the sandbox's network namespace
// through the init's relay. A refused connection inside (nothing listening
// yet) is an error here, so callers can retry; while the sandbox is frozen
// Dial waits (bounded by ctx).
func (s *Sandbox) Dial(ctx context.Context, port int) (net.Conn, error) {
	if port < 1 || port > 65535 {
		return nil, fmt.Errorf("isolate: port %d out of range", port)
	}
	select {
	case <-s.closed:
		return nil, ErrClosed
	default:
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", s.relayAddr)
	if err != nil {
		return nil, fmt.Errorf("isolate: sandbox %s: relay: %w", s.id, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	err = handshake(c, port)
	if !stop() || err != nil {
		c.Close()
		if ctx.Err() != nil {
			return nil, fmt.Errorf("isolate: sandbox %s: dial port %d: %w", s.id, port, ctx.Err())
		}
		return nil, fmt.Errorf("isolate: sandbox %s: dial port %d: %w", s.id, port, err)
	}
	return c, nil
}

func handshake(c net.Conn, port int) error {
	var hdr [2]byte
	binary.BigEndian.PutUint16(hdr[:], uint16(port))
	if _, err := c.Write(hdr[:]); err != nil {
		return err
	}
	var st [1]byte
	if _, err := io.ReadFull(c, st[:]); err != nil {
		return err
	}
	if st[0] == relayOK {
		return nil
	}
	var n [2]byte
	if _, err := io.ReadFull(c, n[:]); err != nil {
		return err
	}
	msg := make([]byte, binary.BigEndian.Uint16(n[:]))
	if _, err := io.ReadFull(c, msg); err != nil {
		return err
	}
	return fmt.Errorf("inside: %s", msg)
}
