package sandboxd

import (
	"context"
	"net/http"
)

// MaxExecOutputBytes bounds a buffered exec's stdout and stderr together;
// past it the node kills the command and answers 413.
const MaxExecOutputBytes = 8 << 20

// ExecRequest is the body of POST /v1/sandboxes/{id}/exec.
type ExecRequest struct {
	Argv []string `json:"argv"`
	// Cwd is the working directory inside the guest; empty is the guest's
	// default.
	Cwd string            `json:"cwd,omitempty"`
	Env map[string]string `json:"env,omitempty"`
	// TimeoutSeconds bounds the run (504 past it); 0 is no limit beyond
	// the request's own.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// ExecResult is a finished buffered exec. Output that is not valid UTF-8
// arrives with U+FFFD in its place.
type ExecResult struct {
	ExitCode int    `json:"exit_code"`
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
}

// Exec runs a command to completion inside the sandbox and returns its exit
// code and output. It needs the sandbox's own token (c.As(claim.Token)) and
// wakes a hibernated or archived sandbox. A missing executable, a bad cwd
// or a bad body is ErrBadRequest; a timeout is a 504 *APIError.
func (c *Client) Exec(ctx context.Context, id string, req ExecRequest) (*ExecResult, error) {
	var out ExecResult
	if err := c.do(ctx, http.MethodPost, sandboxPath(id, "exec"), nil, req, &out, "POST /v1/sandboxes/{id}/exec"); err != nil {
		return nil, err
	}
	return &out, nil
}
