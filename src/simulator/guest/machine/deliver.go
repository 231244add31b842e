package machine

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"
)

// ErrAlreadyClaimed is returned by Deliver when the program has accepted a
// claim before (it answered 409).
var ErrAlreadyClaimed = errors.New("machine: the sandbox is already claimed")

// Retry pacing while the program is not yet listening: it starts within
// milliseconds of the sandbox, so the first retries are quick.
const (
	firstRetry = time.Millisecond
	maxRetry   = 50 * time.Millisecond
)

// Deliver sends the claim to the program of a started sandbox through dial
// (which reaches 127.0.0.1:port inside, as isolate.Sandbox.Dial does),
// retrying while the program is not yet listening (dial answers refused),
// until ctx ends. It returns once the program has started its guests, so
// they can be dialled right away.
func Deliver(ctx context.Context, dial func(ctx context.Context, port int) (net.Conn, error), c Claim) error {
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	return controlCall(ctx, dial, http.MethodPost, "/claim", body, "deliver claim")
}

// WaitReady waits until the machine's program has started what the
// sandbox serves before any claim (the code interpreter and its default
// kernel), so a node counts a warm VM as warm only when it is. A program
// that failed to start it answers the error.
func WaitReady(ctx context.Context, dial func(ctx context.Context, port int) (net.Conn, error)) error {
	return controlCall(ctx, dial, http.MethodGet, "/ready", nil, "wait for readiness")
}

// controlCall sends one request to the program's control port, retrying
// the dial while nothing listens there yet (the program is starting).
func controlCall(ctx context.Context, dial func(ctx context.Context, port int) (net.Conn, error), method, path string, body []byte, op string) error {
	wait := firstRetry
	for {
		conn, err := dial(ctx, ControlPort)
		if err == nil {
			return roundTrip(ctx, conn, method, path, body, op)
		}
		if !refused(err) {
			return fmt.Errorf("machine: %s: %w", op, err)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("machine: %s: %w (last dial: %v)", op, ctx.Err(), err)
		case <-t.C:
		}
		wait = min(2*wait, maxRetry)
	}
}

// refused reports whether err says nothing listens on the port yet.
// isolate's relay passes the inside dial's failure on as text, so the
// message is matched as well as the errno.
func refused(err error) bool {
	return errors.Is(err, syscall.ECONNREFUSED) || strings.Contains(err.Error(), "connection refused")
}

// roundTrip sends one request over conn and reads the answer.
func roundTrip(ctx context.Context, conn net.Conn, method, path string, body []byte, op string) error {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	req, err := http.NewRequestWithContext(ctx, method, "http://sandbox"+path, bytes.NewReader(body))
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Close = true
	if err := req.Write(conn); err != nil {
		return fmt.Errorf("machine: %s: %w", op, contextOr(ctx, err))
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		return fmt.Errorf("machine: %s: %w", op, contextOr(ctx, err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	switch resp.StatusCode {
	case http.StatusNoContent, http.StatusOK:
		return nil
	case http.StatusConflict:
		return ErrAlreadyClaimed
	default:
		return fmt.Errorf("machine: %s: %s: %s", op, resp.Status, strings.TrimSpace(string(msg)))
	}
}

// contextOr prefers ctx's error to the I/O error its deadline caused.
func contextOr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
