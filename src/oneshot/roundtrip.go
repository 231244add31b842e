package oneshot

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
)

// MaxResponseHeader bounds an answer's status line and headers.
const MaxResponseHeader = 1 << 20

// ErrHeaderTooLarge is an answer whose status line and headers pass
// MaxResponseHeader.
var ErrHeaderTooLarge = errors.New("oneshot: the answer's headers are too large")

// RoundTrip writes r over conn with Connection: close and reads its
// answer. It owns conn: an error closes it, and so does closing the
// answer's body. A 101 answer's body is the upgraded connection itself,
// readable and writable (and half-closable with CloseWrite when conn is),
// as httputil.ReverseProxy expects; a 1xx answer other than 101 is read
// past. r's context ending closes conn, which ends any read or write in
// progress.
func RoundTrip(r *http.Request, conn net.Conn) (*http.Response, error) {
	stop := context.AfterFunc(r.Context(), func() { _ = conn.Close() })
	fail := func(err error) (*http.Response, error) {
		stop()
		_ = conn.Close()
		return nil, err
	}
	// One exchange per connection: the far end closes after answering.
	r.Close = true
	w := bufio.NewWriterSize(conn, 4<<10)
	if err := r.Write(w); err != nil {
		return fail(err)
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	bound := &headerBound{r: conn, left: MaxResponseHeader}
	br := bufio.NewReader(bound)
	for {
		resp, err := http.ReadResponse(br, r)
		if err != nil {
			return fail(err)
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		bound.left = -1
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body = &upgradedBody{Reader: br, conn: conn, stop: stop}
			return resp, nil
		}
		resp.Body = &closingBody{ReadCloser: resp.Body, conn: conn, stop: stop}
		return resp, nil
	}
}

// headerBound fails reads past a bound until the headers are read, then
// passes everything: the body's length is the far end's business.
type headerBound struct {
	r    io.Reader
	left int64 // < 0 once disarmed
}

func (h *headerBound) Read(p []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(p)
	}
	if h.left == 0 {
		return 0, ErrHeaderTooLarge
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= int64(n)
	return n, err
}

// closingBody closes the connection with the answer's body.
type closingBody struct {
	io.ReadCloser
	conn net.Conn
	stop func() bool
}

func (b *closingBody) Close() error {
	b.stop()
	err := b.ReadCloser.Close()
	_ = b.conn.Close()
	return err
}

// upgradedBody is the connection after a 101: what the far end sends
// (some of it perhaps already buffered) and what the caller writes to it.
type upgradedBody struct {
	io.Reader
	conn net.Conn
	stop func() bool
}

func (b *upgradedBody) Write(p []byte) (int, error) { return b.conn.Write(p) }

func (b *upgradedBody) Close() error {
	b.stop()
	return b.conn.Close()
}

// CloseWrite passes a half-close on to the far end, as the Transport's
// upgraded connection does.
func (b *upgradedBody) CloseWrite() error {
	if cw, ok := b.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
