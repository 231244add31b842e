package envdproxy

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
)

// A request with no body, or a small one of known length, is sent and its
// answer read on the handler's own goroutine, over the relay as one
// HTTP/1.1 exchange. net/http's Transport would hand each exchange to a
// writer and a reader goroutine of its own: three wake-ups a request,
// each one likely on the other CPU, which on a small VM cost more than
// the rest of the proxy's work. Requests that stream a body keep the
// Transport: it writes the body while the answer is read (full duplex).

// inlineBodyMax is the largest body sent inline. It fits a socket's send
// buffer, so writing it never waits on a guest that answers before
// reading it.
const inlineBodyMax = 64 << 10

// maxResponseHeader bounds an answer's status line and headers, inline
// and through the Transport alike.
const maxResponseHeader = 1 << 20

// inlineable reports whether r can go inline.
func inlineable(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	return r.ContentLength > 0 && r.ContentLength <= inlineBodyMax
}

// errHeaderTooLarge is a guest answer whose headers pass maxResponseHeader.
var errHeaderTooLarge = errors.New("envdproxy: the guest's answer headers are too large")

// headerBound fails reads past a bound until the headers are read, then
// passes everything: the body's length is the guest's business.
type headerBound struct {
	r    io.Reader
	left int64 // < 0 once disarmed
}

func (h *headerBound) Read(p []byte) (int, error) {
	if h.left < 0 {
		return h.r.Read(p)
	}
	if h.left == 0 {
		return 0, errHeaderTooLarge
	}
	if int64(len(p)) > h.left {
		p = p[:h.left]
	}
	n, err := h.r.Read(p)
	h.left -= int64(n)
	return n, err
}

// inlineRoundTrip writes r over conn and reads its answer. The answer's
// body reads from conn and closes it; a 101 answer's body is the upgraded
// connection itself, both ways, as the reverse proxy expects. A 1xx
// answer other than 101 is read past. The request's context ending
// closes conn, which ends any read or write in progress.
func inlineRoundTrip(r *http.Request, conn net.Conn) (*http.Response, error) {
	stop := context.AfterFunc(r.Context(), func() { _ = conn.Close() })
	// One exchange per relay: the guest closes after answering.
	r.Close = true
	w := bufio.NewWriterSize(conn, 4<<10)
	if err := r.Write(w); err != nil {
		stop()
		return nil, err
	}
	if err := w.Flush(); err != nil {
		stop()
		return nil, err
	}
	bound := &headerBound{r: conn, left: maxResponseHeader}
	br := bufio.NewReader(bound)
	for {
		resp, err := http.ReadResponse(br, r)
		if err != nil {
			stop()
			return nil, err
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 && resp.StatusCode != http.StatusSwitchingProtocols {
			continue
		}
		bound.left = -1
		if resp.StatusCode == http.StatusSwitchingProtocols {
			resp.Body = &upgradedBody{Reader: br, conn: conn, stop: stop}
			return resp, nil
		}
		resp.Body = &relayBody{ReadCloser: resp.Body, conn: conn, stop: stop}
		return resp, nil
	}
}

// relayBody closes the relay with the answer's body.
type relayBody struct {
	io.ReadCloser
	conn net.Conn
	stop func() bool
}

func (b *relayBody) Close() error {
	b.stop()
	err := b.ReadCloser.Close()
	_ = b.conn.Close()
	return err
}

// upgradedBody is the relay after a 101: what the guest sends (some of it
// perhaps already buffered) and what the client writes to it.
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

// CloseWrite passes a client's half-close on to the guest, as the
// Transport's upgraded connection does.
func (b *upgradedBody) CloseWrite() error {
	if cw, ok := b.conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return nil
}
