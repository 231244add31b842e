package sandboxd

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// relayHandshakeTimeout bounds the upgrade exchange when ctx has no
// deadline of its own; the relayed stream itself is unbounded.
const relayHandshakeTimeout = 30 * time.Second

// RelayConn is the guest stream behind a 101 answer. It is a net.Conn
// whose CloseWrite shuts down only the client's sending half: the guest
// sees EOF and can still reply.
type RelayConn interface {
	net.Conn
	CloseWrite() error
}

// DialPort opens the guest-port relay: GET /v1/sandboxes/{id}/ports/{port}
// with Upgrade: tcp. After the node's 101 the returned connection carries
// raw bytes to and from 127.0.0.1:{port} inside the guest, so any protocol
// (HTTP/1.1, h2c, …) runs over it unchanged.
//
// The client's token authorizes it: normally the sandbox's own token
// (c.As(token)), which also wakes a hibernated sandbox. ctx bounds only the
// handshake; close the connection to end the relay. A refused upgrade is an
// *APIError (ErrGuestUnreachable for 502, ErrNotFound, ErrUpgradeRequired…).
func (c *Client) DialPort(ctx context.Context, id string, port int) (RelayConn, error) {
	const op = "GET /v1/sandboxes/{id}/ports/{port}"
	raw, err := c.dialNode(ctx)
	if err != nil {
		return nil, fmt.Errorf("sandboxd: %s: dial %s: %w", op, c.base.Host, err)
	}

	// ctx ending (deadline or cancel) expires the socket under the blocked
	// handshake; without a deadline of its own the handshake gets one.
	if _, ok := ctx.Deadline(); !ok {
		_ = raw.SetDeadline(time.Now().Add(relayHandshakeTimeout))
	}
	stop := context.AfterFunc(ctx, func() { _ = raw.SetDeadline(time.Unix(1, 0)) })

	conn, err := c.upgrade(raw, id, port, op)
	if !stop() || ctx.Err() != nil {
		if conn != nil {
			_ = conn.Close()
		} else {
			_ = raw.Close()
		}
		return nil, fmt.Errorf("sandboxd: %s: %w", op, ctx.Err())
	}
	if err != nil {
		_ = raw.Close()
		return nil, err
	}
	_ = raw.SetDeadline(time.Time{})
	return conn, nil
}

func (c *Client) dialNode(ctx context.Context) (net.Conn, error) {
	host := c.base.Host
	if c.base.Scheme == "https" {
		if !strings.Contains(host, ":") || strings.HasSuffix(host, "]") {
			host = net.JoinHostPort(strings.Trim(host, "[]"), "443")
		}
		d := &tls.Dialer{NetDialer: c.dialer, Config: &tls.Config{
			ServerName: c.base.Hostname(),
			// The relay speaks HTTP/1.1 upgrade; never negotiate h2.
			NextProtos: []string{"http/1.1"},
			MinVersion: tls.VersionTLS12,
		}}
		return d.DialContext(ctx, "tcp", host)
	}
	if !strings.Contains(host, ":") || strings.HasSuffix(host, "]") {
		host = net.JoinHostPort(strings.Trim(host, "[]"), "80")
	}
	return c.dialer.DialContext(ctx, "tcp", host)
}

// maxHandshakeBytes bounds the head of a relay handshake's answer (status
// line and headers, and any error body read with it).
const maxHandshakeBytes = 64 << 10

func (c *Client) upgrade(raw net.Conn, id string, port int, op string) (RelayConn, error) {
	req, err := http.NewRequest(http.MethodGet, c.url(sandboxPath(id, "ports/"+strconv.Itoa(port)), nil), nil)
	if err != nil {
		return nil, fmt.Errorf("sandboxd: %s: build request: %w", op, err)
	}
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "tcp")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if err := req.Write(raw); err != nil {
		return nil, fmt.Errorf("sandboxd: %s: write request: %w", op, err)
	}
	// The node's answer is read through a bound, so a node (or whatever
	// answers at its address) cannot hold the caller with endless headers;
	// the handshake's deadline bounds the time.
	limited := &io.LimitedReader{R: raw, N: maxHandshakeBytes}
	br := bufio.NewReader(limited)
	resp, err := http.ReadResponse(br, req)
	if err != nil {
		if limited.N <= 0 {
			return nil, fmt.Errorf("sandboxd: %s: the answer's head is over %d bytes: %w", op, maxHandshakeBytes, ErrResponseTooLarge)
		}
		return nil, fmt.Errorf("sandboxd: %s: read response: %w", op, err)
	}
	if resp.StatusCode != http.StatusSwitchingProtocols {
		defer resp.Body.Close()
		return nil, readAPIError(resp, op)
	}
	if !strings.EqualFold(resp.Header.Get("Upgrade"), "tcp") {
		return nil, fmt.Errorf("sandboxd: %s: 101 answer upgrades to %q, not tcp", op, resp.Header.Get("Upgrade"))
	}
	return &relayConn{Conn: raw, br: br}, nil
}

// relayConn reads through the handshake's bufio.Reader first, so guest
// bytes that arrived in the same segment as the 101 are not lost.
type relayConn struct {
	net.Conn
	br *bufio.Reader
}

func (r *relayConn) Read(p []byte) (int, error) {
	if r.br != nil {
		if r.br.Buffered() > 0 {
			return r.br.Read(p)
		}
		r.br = nil // drained: read the socket directly from now on
	}
	return r.Conn.Read(p)
}

// CloseWrite half-closes the sending side of the underlying connection.
func (r *relayConn) CloseWrite() error {
	type closeWriter interface{ CloseWrite() error }
	if cw, ok := r.Conn.(closeWriter); ok {
		return cw.CloseWrite()
	}
	return errors.New("sandboxd: relay connection cannot half-close")
}
