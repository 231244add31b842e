package envdproxy

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"
)

// errUploadTooLarge is what an upload's body answers past
// Config.MaxUploadBytes; the forwarder turns it into 413.
var errUploadTooLarge = errors.New("upload exceeds the data plane's size limit")

// isUpload is an envd file upload: POST /files on envd's port, with a
// token or a signed URL alike.
func isUpload(r *http.Request, t Target) bool {
	return t.Port == EnvdPort && r.Method == http.MethodPost && cleanPath(r.URL.Path) == "/files"
}

// uploadSlots counts each sandbox's uploads in flight. A sandbox's entry
// goes when its last upload ends, so the map is as large as the uploads
// under way.
type uploadSlots struct {
	max int // <= 0: no bound

	mu       sync.Mutex
	inFlight map[string]int
}

func newUploadSlots(max int) *uploadSlots {
	return &uploadSlots{max: max, inFlight: map[string]int{}}
}

// acquire takes one of id's slots; false means all are taken.
func (u *uploadSlots) acquire(id string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.max > 0 && u.inFlight[id] >= u.max {
		return false
	}
	u.inFlight[id]++
	return true
}

func (u *uploadSlots) release(id string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.inFlight[id] <= 1 {
		delete(u.inFlight, id)
		return
	}
	u.inFlight[id]--
}

// admitUpload applies the upload bounds to r before it is relayed: a
// declared size past the limit and a sandbox with every slot taken are
// answered here (413, 429); otherwise the body is capped, since a chunked
// body declares no size. The returned release must be called when the
// upload is over; ok false means the answer is written.
func (p *Proxy) admitUpload(w http.ResponseWriter, r *http.Request, t Target, line *accessLine) (release func(), ok bool) {
	limit := p.cfg.MaxUploadBytes
	if limit > 0 && r.ContentLength > limit {
		line.reason = "upload too large"
		refuseUnreadBody(w)
		reply(w, http.StatusRequestEntityTooLarge, tooLargeMessage(limit))
		return nil, false
	}
	if !p.uploads.acquire(t.ID) {
		line.reason = "too many concurrent uploads"
		refuseUnreadBody(w)
		w.Header().Set("Retry-After", "1")
		reply(w, http.StatusTooManyRequests,
			fmt.Sprintf("too many uploads to this sandbox at once (at most %d); retry when one has finished", p.cfg.MaxConcurrentUploads))
		return nil, false
	}
	if limit > 0 {
		r.Body = &cappedBody{ReadCloser: r.Body, left: limit}
	}
	return func() { p.uploads.release(t.ID) }, true
}

// refuseUnreadBody makes a refusal of a body the proxy will not read go
// out at once: net/http otherwise reads what is left of a small body
// before it writes the answer, so a client that sends slowly (or stalls)
// would never see its 413 or 429. The connection closes after the answer.
func refuseUnreadBody(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
}

func tooLargeMessage(limit int64) string {
	return "upload exceeds the data plane's limit of " + strconv.FormatInt(limit, 10) + " bytes"
}

// cappedBody fails with errUploadTooLarge once more than left bytes have
// come, before passing the excess on: the guest never sees more than the
// limit.
type cappedBody struct {
	io.ReadCloser
	left int64
}

func (c *cappedBody) Read(b []byte) (int, error) {
	if c.left < 0 {
		return 0, errUploadTooLarge
	}
	// Read one byte past the limit at most, to tell "exactly the limit"
	// from "more".
	if int64(len(b)) > c.left+1 {
		b = b[:c.left+1]
	}
	n, err := c.ReadCloser.Read(b)
	if int64(n) > c.left {
		c.left = -1
		return 0, errUploadTooLarge
	}
	c.left -= int64(n)
	return n, err
}
