package e2b

import (
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/metrics"
)

// validationCounter remembers the status a handler answered, so that
// every 400 of the surface counts as a validation refusal in one place,
// whichever of the handlers' many checks wrote it. The other refusals
// (rate, cap, quota, capacity) are counted where they are decided, since
// their status codes are shared.
type validationCounter struct {
	http.ResponseWriter
	status int
}

func (v *validationCounter) WriteHeader(status int) {
	if v.status == 0 {
		v.status = status
	}
	v.ResponseWriter.WriteHeader(status)
}

func (v *validationCounter) Write(b []byte) (int, error) {
	if v.status == 0 {
		v.status = http.StatusOK
	}
	return v.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer
// (flushes of streamed answers).
func (v *validationCounter) Unwrap() http.ResponseWriter { return v.ResponseWriter }

// countValidation runs h and counts its answer if it was a 400.
func (s *Server) countValidation(w http.ResponseWriter, r *http.Request, c caller, h handlerFunc) {
	if s.cfg.Refusals == nil {
		h(w, r, c)
		return
	}
	vc := &validationCounter{ResponseWriter: w}
	h(vc, r, c)
	if vc.status == http.StatusBadRequest {
		s.cfg.Refusals.Refused(metrics.ReasonValidation)
	}
}
