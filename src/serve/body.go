package serve

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"
)

// Defaults of BodyLimits. The idle bound is long enough for a client on a
// poor link to keep an upload going and short enough that a stalled one
// gives its file descriptors back within a minute; the total bound lets a
// gigabyte through at under 2 MB/s.
const (
	DefaultBodyIdleTimeout = 30 * time.Second
	DefaultBodyTimeout     = 10 * time.Minute
)

// BodyLimits bound the reading of one request body: Idle is the longest
// the client may leave the server waiting for the body's next byte, Total
// the longest the whole body may take, counted from when the handler
// starts. Zero takes the Default* value; a negative value turns that bound
// off.
//
// Only reads of the request body are bounded: a handler that is busy
// elsewhere never times the client out, a response may stream for as long
// as it likes, and a body read to its end frees the connection of any
// deadline, so a long server stream after a short request keeps going. A
// hijacked (upgraded) connection is the handler's own; net/http clears its
// deadlines on Hijack.
type BodyLimits struct {
	Idle, Total time.Duration
}

func (l BodyLimits) withDefaults() BodyLimits {
	if l.Idle == 0 {
		l.Idle = DefaultBodyIdleTimeout
	}
	if l.Total == 0 {
		l.Total = DefaultBodyTimeout
	}
	return l
}

// BodyTimeoutError is what a bounded body's Read answers once a bound has
// passed, and every Read after it. It is a timeout (os.ErrDeadlineExceeded
// matches it), so a handler can answer 408 rather than 400.
type BodyTimeoutError struct {
	// Idle is true when no byte arrived for Limit, false when the whole
	// body took longer than Limit.
	Idle  bool
	Limit time.Duration
}

func (e *BodyTimeoutError) Error() string {
	if e.Idle {
		return fmt.Sprintf("request body: no data for %v", e.Limit)
	}
	return fmt.Sprintf("request body: not complete within %v", e.Limit)
}

// Unwrap makes errors.Is(err, os.ErrDeadlineExceeded) hold.
func (e *BodyTimeoutError) Unwrap() error { return os.ErrDeadlineExceeded }

// Timeout marks the error as a timeout for net.Error-style checks.
func (e *BodyTimeoutError) Timeout() bool { return true }

// IsBodyTimeout reports whether err is (or wraps) a BodyTimeoutError.
func IsBodyTimeout(err error) bool {
	var te *BodyTimeoutError
	return errors.As(err, &te)
}

// BoundBodies bounds every request body h reads with l.
func BoundBodies(h http.Handler, l BodyLimits) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, BoundBody(w, r, l))
	})
}

// BoundBody returns r with its body bounded by l; w must be the writer
// serving r (wrappers reachable through Unwrap are fine). Call it before
// anything reads the body. A body bounded already (an outer BoundBodies)
// is tightened to the stricter of both limits instead of wrapped twice.
//
// r itself is left alone: net/http looks at the body of the request it
// made, after the handler, to tell whether the connection may carry
// another request (a body abandoned part way must not be parsed as the
// next request), and a body swapped in place would hide that from it.
//
// The bounds are connection read deadlines (http.ResponseController), the
// only thing that can interrupt a read blocked on a silent client. Where
// the writer cannot set one (a test recorder, a wrapper without Unwrap)
// the body reads as it is.
func BoundBody(w http.ResponseWriter, r *http.Request, l BodyLimits) *http.Request {
	if r.Body == nil || r.Body == http.NoBody {
		return r
	}
	l = l.withDefaults()
	if l.Idle < 0 && l.Total < 0 {
		return r
	}
	start := time.Now()
	b, ok := r.Body.(*boundedBody)
	if !ok {
		b = &boundedBody{body: r.Body, rc: http.NewResponseController(w)}
	}
	b.tighten(l, start)
	if r.ProtoMajor == 1 {
		b.arm(start)
	}
	if ok {
		return r
	}
	bounded := r.WithContext(r.Context()) // a shallow copy
	bounded.Body = b
	return bounded
}

// arm sets the deadline before any Read, for the handler that answers
// without reading the body: HTTP/1 then reads the rest itself, to reuse
// the connection, and that read must not wait on a silent client either.
// (A later Read moves the deadline again. HTTP/2 reads nothing on the
// handler's behalf, and there a passed deadline would end the stream's
// body for good, so it is not armed early.)
func (b *boundedBody) arm(now time.Time) {
	deadline, _ := b.deadline(now)
	if err := b.rc.SetReadDeadline(deadline); err != nil {
		b.passThrough = true
	}
}

// boundedBody moves the connection's read deadline ahead of each Read.
// Reads of one body are never concurrent (net/http forbids it), so its
// state needs no lock.
type boundedBody struct {
	body io.ReadCloser
	rc   *http.ResponseController

	idle time.Duration // 0: no idle bound
	end  time.Time     // zero: no total bound
	// total is the configured total bound, for the error message.
	total time.Duration

	// passThrough is set once the body ended or deadlines turned out to
	// be unsupported: Read then just reads.
	passThrough bool
	// failed is the sticky timeout.
	failed error
}

func (b *boundedBody) tighten(l BodyLimits, start time.Time) {
	if l.Idle > 0 && (b.idle == 0 || l.Idle < b.idle) {
		b.idle = l.Idle
	}
	if l.Total > 0 {
		if end := start.Add(l.Total); b.end.IsZero() || end.Before(b.end) {
			b.end, b.total = end, l.Total
		}
	}
}

// aLongTimeAgo is a deadline already past: reads fail at once.
var aLongTimeAgo = time.Unix(1, 0)

func (b *boundedBody) Read(p []byte) (int, error) {
	if b.failed != nil {
		return 0, b.failed
	}
	if b.passThrough {
		return b.body.Read(p)
	}
	now := time.Now()
	deadline, idle := b.deadline(now)
	if !deadline.After(now) {
		return 0, b.fail(&BodyTimeoutError{Limit: b.total})
	}
	if err := b.rc.SetReadDeadline(deadline); err != nil {
		b.passThrough = true
		return b.body.Read(p)
	}
	n, err := b.body.Read(p)
	switch {
	case err == nil:
		// The deadline stays: should the handler stop reading here, the
		// server's own read of the rest (to reuse the connection) is
		// bounded by it too.
	case errors.Is(err, io.EOF):
		// The whole body is in; what follows (a long response) is not
		// the body's to bound. (HTTP/1 clears the deadline itself when it
		// starts watching for the client going away; HTTP/2 keeps a
		// per-stream timer that would otherwise still fire.)
		_ = b.rc.SetReadDeadline(time.Time{})
		b.passThrough = true
	case errors.Is(err, os.ErrDeadlineExceeded):
		if idle {
			return n, b.fail(&BodyTimeoutError{Idle: true, Limit: b.idle})
		}
		return n, b.fail(&BodyTimeoutError{Limit: b.total})
	}
	return n, err
}

// deadline is the next read's deadline and whether it is the idle bound
// (rather than the total one).
func (b *boundedBody) deadline(now time.Time) (time.Time, bool) {
	if b.idle == 0 {
		return b.end, false
	}
	d := now.Add(b.idle)
	if !b.end.IsZero() && b.end.Before(d) {
		return b.end, false
	}
	return d, true
}

// fail records err for every later Read and leaves the connection's read
// deadline in the past, so whatever reads the rest of the body afterwards
// (net/http, to reuse the connection) fails at once and the connection is
// closed instead of waiting on the silent client.
func (b *boundedBody) fail(err error) error {
	b.failed = err
	_ = b.rc.SetReadDeadline(aLongTimeAgo)
	return err
}

func (b *boundedBody) Close() error { return b.body.Close() }
