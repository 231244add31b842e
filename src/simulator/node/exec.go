package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/bufexec"
)

// execAnswerGrace is how much longer than timeout_seconds the node waits
// for an isolated machine's own answer, so the guest's 504 (and its kill)
// comes first.
const execAnswerGrace = 5 * time.Second

// handleExec is POST /v1/sandboxes/{id}/exec: the sandbox's own token only.
// It wakes a hibernated or archived sandbox, as the relay does, and holds
// the sandbox against the idle sweep while the command runs.
func (n *Node) handleExec(w http.ResponseWriter, r *http.Request) {
	raw, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		writeError(w, errBadBody)
		return
	}
	var req sandboxd.ExecRequest
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		writeError(w, errBadBody)
		return
	}
	if err := bufexec.Check(req); err != nil {
		writeError(w, errorf(http.StatusBadRequest, "%s", err))
		return
	}

	n.mu.Lock()
	sb, aerr := n.sandboxByTokenLocked(r.PathValue("id"), bearerToken(r), false)
	if aerr != nil {
		n.mu.Unlock()
		writeError(w, aerr)
		return
	}
	if aerr := refuseFailed(sb, "exec"); aerr != nil {
		n.mu.Unlock()
		writeError(w, aerr)
		return
	}
	if sb.hibernated {
		n.resumeLocked(sb)
	}
	env := guestEnv(sb.env)
	guests, token := sb.guests, sb.token
	sb.openRelays++
	n.mu.Unlock()
	defer func() {
		n.mu.Lock()
		sb.openRelays--
		sb.lastActive = n.cfg.Clock.Now()
		n.mu.Unlock()
	}()

	var res sandboxd.ExecResult
	if guests.machine != nil {
		res, aerr = n.execInMachine(r.Context(), guests, token, req, env)
	} else {
		res, aerr = execOnHost(r.Context(), guests.scratch, req, env)
	}
	if r.Context().Err() != nil {
		return // the client hung up: the command is killed, nobody reads an answer
	}
	if aerr != nil {
		writeError(w, aerr)
		return
	}
	writeJSON(w, http.StatusOK, res)
}

// execOnHost runs the command of an unisolated sandbox. Its guest has no
// filesystem or user of its own, so the command is an ordinary host
// process (no isolation at all: the simulator's unisolated mode is for
// trusted tests) started in the sandbox's scratch directory, which stands
// for the guest's root: a cwd resolves under it and HOME names it. The
// executable is looked up in the node's PATH, the guest's tools being the
// host's; the node's own environment is not passed on.
func execOnHost(ctx context.Context, scratch string, req sandboxd.ExecRequest, env map[string]string) (sandboxd.ExecResult, *apiError) {
	if err := os.MkdirAll(scratch, 0o700); err != nil {
		return sandboxd.ExecResult{}, errorf(http.StatusInternalServerError, "guest scratch dir")
	}
	base := func(ctx context.Context, name string, args ...string) *exec.Cmd {
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = scratch
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + scratch}
		return cmd
	}
	inGuest := func(p string) string { return filepath.Join(scratch, filepath.Clean("/"+p)) }
	cmd, err := bufexec.Command(ctx, base, req, inGuest, env)
	if err != nil {
		return sandboxd.ExecResult{}, execError(err)
	}
	res, err := bufexec.Run(ctx, cmd, time.Duration(req.TimeoutSeconds)*time.Second, sandboxd.MaxExecOutputBytes)
	if err != nil {
		return sandboxd.ExecResult{}, execError(err)
	}
	return res, nil
}

// execInMachine runs the command inside the sandbox's machine through the
// hook the isolation provides (the guest program runs it as the sandbox's
// user); the claim's guest env goes with the request, under its own env.
func (n *Node) execInMachine(ctx context.Context, g *guestSet, token string, req sandboxd.ExecRequest, env map[string]string) (sandboxd.ExecResult, *apiError) {
	hook := n.cfg.Isolation.Exec
	if hook == nil {
		return sandboxd.ExecResult{}, errorf(http.StatusBadGateway, "guest has no buffered exec")
	}
	merged := make(map[string]string, len(env)+len(req.Env))
	for k, v := range env {
		merged[k] = v
	}
	for k, v := range req.Env {
		merged[k] = v
	}
	req.Env = merged
	if req.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutSeconds)*time.Second+execAnswerGrace)
		defer cancel()
	}
	select {
	case <-g.handedOver:
	case <-ctx.Done():
		return sandboxd.ExecResult{}, errGuestNoListen
	}
	if g.handOverErr != nil {
		return sandboxd.ExecResult{}, errGuestNoListen
	}
	res, err := hook(ctx, g.machine.Dial, token, req)
	if err != nil {
		var apiErr *sandboxd.APIError
		if errors.As(err, &apiErr) {
			return sandboxd.ExecResult{}, errorf(apiErr.Status, "%s", apiErr.Message)
		}
		if ctx.Err() != nil && req.TimeoutSeconds > 0 {
			return sandboxd.ExecResult{}, errorf(http.StatusGatewayTimeout, "the command outlived timeout_seconds")
		}
		n.log.Debug("exec: guest unreachable", "node", n.cfg.Name, "err", err)
		return sandboxd.ExecResult{}, errGuestNoListen
	}
	return *res, nil
}

// execError answers a bufexec error with the status the contract gives it.
func execError(err error) *apiError {
	return errorf(bufexec.Status(err), "%s", err)
}
