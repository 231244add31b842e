package machine

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/bufexec"
	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
)

// maxExecRequestBytes bounds an exec request on the control port, as the
// node bounds its own request bodies.
const maxExecRequestBytes = 1 << 20

// serveExec runs one buffered exec (POST /exec on the control port) as the
// sandbox's user, with that user's environment, home and PATH, plus the
// request's env. The claim's token is the credential: a process inside
// reaches the control port but does not know the token, so it cannot use
// the program (which runs as root) to run anything. Errors are sandboxd's
// {"error"} body with the status the node passes on.
func (p *program) serveExec(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	token := p.token
	p.mu.Unlock()
	if token == "" || !sameToken(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "), token) {
		execReply(w, http.StatusUnauthorized, sandboxd.ErrorResponse{Error: "unauthorized"})
		return
	}
	var req sandboxd.ExecRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxExecRequestBytes)).Decode(&req); err != nil {
		execReply(w, http.StatusBadRequest, sandboxd.ErrorResponse{Error: "invalid request body"})
		return
	}
	// A relative cwd is under the user's home, where commands start.
	var home string
	base := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		cmd := isolate.Command(ctx, name, args...)
		home = cmd.Dir
		return cmd
	}
	dir := func(cwd string) string {
		if filepath.IsAbs(cwd) {
			return filepath.Clean(cwd)
		}
		return filepath.Join(home, cwd)
	}
	cmd, err := bufexec.Command(r.Context(), base, req, dir, nil)
	if err == nil {
		var res sandboxd.ExecResult
		res, err = bufexec.Run(r.Context(), cmd, time.Duration(req.TimeoutSeconds)*time.Second, sandboxd.MaxExecOutputBytes)
		if err == nil {
			execReply(w, http.StatusOK, res)
			return
		}
	}
	execReply(w, bufexec.Status(err), sandboxd.ErrorResponse{Error: err.Error()})
}

func execReply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// sameToken compares in constant time, hashing first so the length does
// not leak either.
func sameToken(got, want string) bool {
	a, b := sha256.Sum256([]byte(got)), sha256.Sum256([]byte(want))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// Exec runs a buffered exec in a claimed sandbox through dial (as
// isolate.Sandbox.Dial reaches 127.0.0.1:port inside), presenting the
// claim's token. A refusal comes back as a *sandboxd.APIError carrying the
// status and message the program answered.
func Exec(ctx context.Context, dial func(ctx context.Context, port int) (net.Conn, error), token string, req sandboxd.ExecRequest) (*sandboxd.ExecResult, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("machine: exec: encode: %w", err)
	}
	conn, err := dial(ctx, ControlPort)
	if err != nil {
		return nil, fmt.Errorf("machine: exec: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	hr, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://sandbox/exec", bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hr.Header.Set("Content-Type", "application/json")
	hr.Header.Set("Authorization", "Bearer "+token)
	hr.Close = true
	if err := hr.Write(conn); err != nil {
		return nil, fmt.Errorf("machine: exec: %w", contextOr(ctx, err))
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), hr)
	if err != nil {
		return nil, fmt.Errorf("machine: exec: %w", contextOr(ctx, err))
	}
	defer resp.Body.Close()
	// The output cap is the program's; JSON escaping can grow it up to
	// six times, and the error body is small.
	raw, err := io.ReadAll(io.LimitReader(resp.Body, 6*sandboxd.MaxExecOutputBytes+(64<<10)))
	if err != nil {
		return nil, fmt.Errorf("machine: exec: read answer: %w", contextOr(ctx, err))
	}
	if resp.StatusCode != http.StatusOK {
		var e sandboxd.ErrorResponse
		_ = json.Unmarshal(raw, &e)
		return nil, &sandboxd.APIError{Status: resp.StatusCode, Message: e.Error, Op: "machine exec"}
	}
	var res sandboxd.ExecResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return nil, fmt.Errorf("machine: exec: decode answer: %w", err)
	}
	return &res, nil
}
