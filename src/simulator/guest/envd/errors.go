package envd

import (
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"os"
	"syscall"

	"connectrpc.com/connect"
)

// failure is an error with both of the shapes envd answers in: an HTTP
// status for the REST endpoints and a Connect code for the RPCs.
type failure struct {
	status int
	code   connect.Code
	err    error
}

func (f *failure) Error() string { return f.err.Error() }
func (f *failure) Unwrap() error { return f.err }

func newFailure(status int, code connect.Code, err error) *failure {
	return &failure{status: status, code: code, err: err}
}

// classifyFS turns a file-operation error into a failure, keeping err's
// message (which names the guest path, never anything of the host beyond
// the sandbox's own directory).
func classifyFS(err error) *failure {
	var f *failure
	switch {
	case errors.As(err, &f):
		return f
	case errors.Is(err, errOutsideHome), errors.Is(err, errBadPath):
		return newFailure(http.StatusBadRequest, connect.CodeInvalidArgument, err)
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The client's request body stalled (the server's body bounds).
		return newFailure(http.StatusRequestTimeout, connect.CodeDeadlineExceeded, err)
	case errors.Is(err, io.ErrUnexpectedEOF):
		// The client's request body ended short of what it declared.
		return newFailure(http.StatusBadRequest, connect.CodeInvalidArgument, err)
	case isEscape(err):
		return newFailure(http.StatusForbidden, connect.CodePermissionDenied, err)
	case errors.Is(err, fs.ErrNotExist):
		return newFailure(http.StatusNotFound, connect.CodeNotFound, err)
	case errors.Is(err, fs.ErrExist):
		return newFailure(http.StatusConflict, connect.CodeAlreadyExists, err)
	case errors.Is(err, fs.ErrPermission):
		return newFailure(http.StatusForbidden, connect.CodePermissionDenied, err)
	case errors.Is(err, syscall.ENOSPC):
		return newFailure(http.StatusInsufficientStorage, connect.CodeResourceExhausted, err)
	case errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.EISDIR),
		errors.Is(err, syscall.EINVAL), errors.Is(err, syscall.ENAMETOOLONG), errors.Is(err, syscall.ELOOP):
		// Each is the shape of the path or of the tree the client named
		// (a file where a directory must be, a name the system refuses,
		// a symlink loop the sandbox's own commands made), not a fault
		// of the guest.
		return newFailure(http.StatusBadRequest, connect.CodeInvalidArgument, err)
	case errors.Is(err, syscall.ENOTEMPTY), errors.Is(err, syscall.EBUSY):
		return newFailure(http.StatusConflict, connect.CodeFailedPrecondition, err)
	default:
		return newFailure(http.StatusInternalServerError, connect.CodeInternal, err)
	}
}

// rpcError is classifyFS for the Connect handlers.
func rpcError(err error) error {
	f := classifyFS(err)
	return connect.NewError(f.code, f.err)
}

// errorBody is envd's REST error document.
type errorBody struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// writeJSONError answers status with envd's {"code","message"} body.
func writeJSONError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorBody{Code: status, Message: msg})
}

// writeFailure answers err, classified as a file-operation error.
func writeFailure(w http.ResponseWriter, err error) {
	f := classifyFS(err)
	writeJSONError(w, f.status, f.Error())
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
