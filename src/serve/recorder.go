package serve

import (
	"bufio"
	"net"
	"net/http"
)

// Recorder is an http.ResponseWriter that notes the final status and the
// body size of an answer, for access logs. It keeps the writer's optional
// abilities reachable: Flush for streamed answers, Hijack for an Upgrade
// (which records 101), and Unwrap for http.ResponseController (full
// duplex). Status stays 0 until something is written.
type Recorder struct {
	http.ResponseWriter
	Status int
	Bytes  int64
}

// WriteHeader records the first final status: 1xx answers other than 101
// are interim, and the final one follows.
func (r *Recorder) WriteHeader(code int) {
	if r.Status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		r.Status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *Recorder) Write(b []byte) (int, error) {
	if r.Status == 0 {
		r.Status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.Bytes += int64(n)
	return n, err
}

// Flush sends what was written so far.
func (r *Recorder) Flush() {
	_ = http.NewResponseController(r.ResponseWriter).Flush()
}

// Hijack hands the connection over for an Upgrade.
func (r *Recorder) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if r.Status == 0 {
		r.Status = http.StatusSwitchingProtocols
	}
	return http.NewResponseController(r.ResponseWriter).Hijack()
}

// Unwrap is the writer underneath, for http.ResponseController.
func (r *Recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }
