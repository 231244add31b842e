package node

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

// apiError is a refusal with the status the contract assigns to it.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s", e.status, e.msg) }

func errorf(status int, format string, args ...any) *apiError {
	return &apiError{status: status, msg: fmt.Sprintf(format, args...)}
}

// Messages shared by several endpoints. Unknown id and wrong token share
// one text so a caller cannot tell which it was.
var (
	errUnauthorized    = &apiError{http.StatusUnauthorized, "unauthorized"}
	errForbidden       = &apiError{http.StatusForbidden, "forbidden"}
	errNotFound        = &apiError{http.StatusNotFound, "sandbox not found"}
	errBadBody         = &apiError{http.StatusBadRequest, "invalid request body"}
	errDraining        = &apiError{http.StatusTooManyRequests, "node draining"}
	errNodeFull        = &apiError{http.StatusTooManyRequests, "node at max_claims"}
	errTenantFull      = &apiError{http.StatusTooManyRequests, "tenant at max_claims"}
	errNoCheckpoint    = &apiError{http.StatusNotFound, "checkpoint not found"}
	errUnknownTemplate = &apiError{http.StatusNotFound, "unknown template"}
	errGuestNoListen   = &apiError{http.StatusBadGateway, "guest unreachable"}
	errPaused          = &apiError{http.StatusConflict, "sandbox is paused"}
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	buf, err := json.Marshal(v)
	if err != nil {
		writeError(w, &apiError{http.StatusInternalServerError, "encode response"})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(buf, '\n'))
}

func writeError(w http.ResponseWriter, e *apiError) {
	buf, _ := json.Marshal(sandboxd.ErrorResponse{Error: e.msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(e.status)
	_, _ = w.Write(append(buf, '\n'))
}
