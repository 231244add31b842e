package proxybench

import (
	"io"
	"net/http"
	"strconv"
)

// guestPort is the guest port the byte source and sink listen on.
const guestPort = 7002

// maxGuestBytes bounds what one GET asks the guest for.
const maxGuestBytes = 1 << 40

// chunk is what the byte source writes per call: large enough that the
// copy, not the call count, is what a bulk download costs.
var chunk = make([]byte, 64<<10)

// guestHandler is the sandbox's application: GET /bytes?n=N answers N
// bytes with a Content-Length (so the connection stays reusable), POST
// reads the whole body and answers how many bytes it got.
func guestHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			n, err := io.Copy(io.Discard, r.Body)
			if err != nil {
				http.Error(w, "reading the body: "+err.Error(), http.StatusBadRequest)
				return
			}
			_, _ = io.WriteString(w, strconv.FormatInt(n, 10))
			return
		}
		n, err := strconv.ParseInt(r.URL.Query().Get("n"), 10, 64)
		if err != nil || n < 0 || n > maxGuestBytes {
			http.Error(w, "n must be a byte count", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		for n > 0 {
			k := min(n, int64(len(chunk)))
			if _, err := w.Write(chunk[:k]); err != nil {
				return
			}
			n -= k
		}
	})
}

// zeros is an endless source of zero bytes, for upload bodies that need
// no buffer of their size.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}
