package envdproxy

import "net/http"

// A request without a body, or with a small one of known length, is sent
// and its answer read on the handler's own goroutine (src/oneshot), over
// the relay as one HTTP/1.1 exchange. Requests that stream a body keep a
// per-request Transport: it writes the body while the answer is read
// (full duplex).

// inlineBodyMax is the largest body sent inline. It fits a socket's send
// buffer, so writing it never waits on a guest that answers before
// reading it.
const inlineBodyMax = 64 << 10

// inlineable reports whether r can go inline.
func inlineable(r *http.Request) bool {
	if r.Body == nil || r.Body == http.NoBody {
		return true
	}
	return r.ContentLength > 0 && r.ContentLength <= inlineBodyMax
}
