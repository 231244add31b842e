package envdproxy

import (
	"context"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"sync"

	"github.com/cocoonstack/sandbox-operator/src/oneshot"
	"github.com/cocoonstack/sandbox-operator/src/serve"
)

// forwarder sends one request over one relay connection. Guest
// connections are never pooled: a kept connection would outlive the relay
// that carries it, and an open relay holds the sandbox's idle clock, so a
// pooled one would keep an unused sandbox from ever hibernating.
type forwarder struct {
	guestHTTP2 bool
	rp         *httputil.ReverseProxy
}

type relayKey struct{}

// relayed is the per-request state the round tripper reads from the
// request context.
type relayed struct {
	conn net.Conn
	tr   *http.Transport
	// body is the client's request body, nil without one.
	body *watchedBody
	// uploadLimit is the size limit the body was capped at, for the 413.
	uploadLimit int64
	// inline sends the exchange on the handler's goroutine (inline.go)
	// instead of through tr.
	inline bool
}

// limitOf is the upload limit noted on r's relay.
func limitOf(r *http.Request) int64 {
	if rl, ok := r.Context().Value(relayKey{}).(*relayed); ok {
		return rl.uploadLimit
	}
	return 0
}

// watchedBody notes the first error the client's body answered other than
// EOF, so the answer to a failed relay can tell the client's fault (413,
// 408) from the guest's (502).
// The transport reads the body on a goroutine of its own, hence the lock.
type watchedBody struct {
	io.ReadCloser
	mu    sync.Mutex
	first error
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err != nil && err != io.EOF {
		b.mu.Lock()
		if b.first == nil {
			b.first = err
		}
		b.mu.Unlock()
	}
	return n, err
}

// err is the body's first failure, nil when it had none.
func (b *watchedBody) err() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.first
}

func newForwarder(guestHTTP2 bool, logger *slog.Logger) *forwarder {
	f := &forwarder{guestHTTP2: guestHTTP2}
	f.rp = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// The guest sees the host the client asked for; the URL host
			// only keys the one-shot transport, which dials nothing.
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = "guest"
			pr.Out.Host = pr.In.Host
			// The control-plane key never belongs to the guest. The
			// access token crosses unchanged: it is envd's own
			// credential, checked again there.
			pr.Out.Header.Del(HeaderAPIKey)
		},
		Transport: relayRoundTripper{},
		// Stream: every write from the guest reaches the client at once
		// (ConnectRPC server streams, process output).
		FlushInterval: -1,
		BufferPool:    &copyBuffers,
		ErrorLog:      log.New(slogWriter{logger}, "", 0),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			// A failure of the client's own body (too large, stalled) is
			// the client's answer, whatever the transport made of it.
			if rl, ok := r.Context().Value(relayKey{}).(*relayed); ok && rl.body != nil && rl.body.err() != nil {
				err = rl.body.err()
			}
			if rec, ok := w.(*recorder); ok && rec.line != nil {
				rec.line.reason = "guest: " + err.Error()
			}
			if rec, ok := w.(*recorder); ok && rec.Status != 0 {
				return // headers already sent; nothing left to say
			}
			switch {
			case errors.Is(err, errUploadTooLarge):
				closeAfter(w, r)
				reply(w, http.StatusRequestEntityTooLarge, tooLargeMessage(limitOf(r)))
			case serve.IsBodyTimeout(err):
				closeAfter(w, r)
				reply(w, http.StatusRequestTimeout, err.Error())
			default:
				reply(w, http.StatusBadGateway, msgUnavailable)
			}
		},
	}
	return f
}

// forward relays r over conn and closes conn when the exchange is over.
// uploadLimit is the cap r's body was given, 0 for none.
func (f *forwarder) forward(w http.ResponseWriter, r *http.Request, conn net.Conn, uploadLimit int64) {
	if r.ProtoMajor == 1 {
		// Let a streaming client keep sending while the guest answers
		// (the HTTP/1 server otherwise stops reading the body once the
		// response starts). HTTP/2 is full duplex already.
		_ = http.NewResponseController(w).EnableFullDuplex()
	}
	rl := &relayed{conn: conn, uploadLimit: uploadLimit, inline: !f.guestHTTP2 && inlineable(r)}
	if !rl.inline {
		rl.tr = &http.Transport{
			DialContext:            oneShot(conn),
			DisableKeepAlives:      !f.guestHTTP2,
			DisableCompression:     true,
			MaxResponseHeaderBytes: oneshot.MaxResponseHeader,
		}
		if f.guestHTTP2 {
			rl.tr.Protocols = new(http.Protocols)
			rl.tr.Protocols.SetUnencryptedHTTP2(true)
		}
	}
	defer func() {
		if rl.tr != nil {
			rl.tr.CloseIdleConnections()
		}
		_ = conn.Close()
	}()
	if r.Body != nil && r.Body != http.NoBody {
		rl.body = &watchedBody{ReadCloser: r.Body}
		r.Body = rl.body
	}
	ctx := context.WithValue(r.Context(), relayKey{}, rl)
	f.rp.ServeHTTP(w, r.WithContext(ctx))
}

// closeAfter makes an HTTP/1 connection close after this answer. The
// rest of a body the proxy gave up on is still on the wire; in full
// duplex net/http would otherwise keep the connection and wait on a
// client that has stopped sending.
func closeAfter(w http.ResponseWriter, r *http.Request) {
	if r.ProtoMajor == 1 {
		w.Header().Set("Connection", "close")
	}
}

// relayRoundTripper sends each request through the transport bound to its
// own relay connection.
type relayRoundTripper struct{}

func (relayRoundTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	rl, ok := r.Context().Value(relayKey{}).(*relayed)
	if !ok {
		return nil, errors.New("envdproxy: request without a relay")
	}
	if rl.inline {
		return oneshot.RoundTrip(r, rl.conn)
	}
	return rl.tr.RoundTrip(r)
}

// oneShot dials conn once; a second dial (which a transport would only
// attempt after losing the first) fails rather than opening another relay.
func oneShot(conn net.Conn) func(context.Context, string, string) (net.Conn, error) {
	var mu sync.Mutex
	used := false
	return func(context.Context, string, string) (net.Conn, error) {
		mu.Lock()
		defer mu.Unlock()
		if used {
			return nil, errors.New("envdproxy: relay connection already used")
		}
		used = true
		return conn, nil
	}
}

// slogWriter routes the reverse proxy's own log lines to debug.
type slogWriter struct{ l *slog.Logger }

func (s slogWriter) Write(b []byte) (int, error) {
	s.l.Debug("relay", "detail", string(b))
	return len(b), nil
}

// copyBufferSize is the size of the buffers the proxy copies bodies with.
// Every read is flushed to the client at once (FlushInterval -1), so the
// buffer size is how many bytes one write and flush moves: the standard
// 32 KiB made a bulk transfer cost more syscalls than the relay it
// follows.
const copyBufferSize = 256 << 10

// copyBuffers lends copy buffers to the reverse proxy.
var copyBuffers = bufferPool{pool: sync.Pool{New: func() any { b := make([]byte, copyBufferSize); return &b }}}

type bufferPool struct{ pool sync.Pool }

func (p *bufferPool) Get() []byte  { return *p.pool.Get().(*[]byte) }
func (p *bufferPool) Put(b []byte) { p.pool.Put(&b) }
