package machine_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/simulator/guest/machine"
)

// fakeProgram answers one claim over a pipe with status and records it.
func fakeProgram(t *testing.T, status int, got chan<- machine.Claim) net.Conn {
	t.Helper()
	client, server := net.Pipe()
	go func() {
		defer server.Close()
		req, err := http.ReadRequest(bufio.NewReader(server))
		if err != nil {
			t.Errorf("read claim: %v", err)
			return
		}
		var c machine.Claim
		if req.Method != http.MethodPost || req.URL.Path != "/claim" || json.NewDecoder(req.Body).Decode(&c) != nil {
			t.Errorf("unexpected request %s %s", req.Method, req.URL)
		}
		got <- c
		fmt.Fprintf(server, "HTTP/1.1 %d %s\r\nContent-Length: 0\r\nConnection: close\r\n\r\n", status, http.StatusText(status))
	}()
	return client
}

func TestDeliverRetriesWhileRefused(t *testing.T) {
	got := make(chan machine.Claim, 1)
	attempts := 0
	dial := func(ctx context.Context, port int) (net.Conn, error) {
		if port != machine.ControlPort {
			t.Errorf("dialled port %d", port)
		}
		attempts++
		if attempts < 4 {
			// What isolate's relay reports while nothing listens inside.
			return nil, errors.New("isolate: sandbox x: dial port 49982: inside: dial tcp 127.0.0.1:49982: connect: connection refused")
		}
		return fakeProgram(t, http.StatusNoContent, got), nil
	}
	want := machine.Claim{ID: "sb-1", Token: "tok"}
	if err := machine.Deliver(context.Background(), dial, want); err != nil {
		t.Fatal(err)
	}
	if c := <-got; c != want || attempts != 4 {
		t.Fatalf("claim %+v after %d attempts", c, attempts)
	}
}

func TestDeliverFailures(t *testing.T) {
	t.Run("other dial errors are not retried", func(t *testing.T) {
		attempts := 0
		boom := errors.New("sandbox closed")
		err := machine.Deliver(context.Background(), func(context.Context, int) (net.Conn, error) {
			attempts++
			return nil, boom
		}, machine.Claim{ID: "x"})
		if !errors.Is(err, boom) || attempts != 1 {
			t.Fatalf("err %v after %d attempts", err, attempts)
		}
	})
	t.Run("the context bounds the retries", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		err := machine.Deliver(ctx, func(context.Context, int) (net.Conn, error) {
			return nil, errors.New("connect: connection refused")
		}, machine.Claim{ID: "x"})
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("409 is ErrAlreadyClaimed", func(t *testing.T) {
		got := make(chan machine.Claim, 1)
		err := machine.Deliver(context.Background(), func(context.Context, int) (net.Conn, error) {
			return fakeProgram(t, http.StatusConflict, got), nil
		}, machine.Claim{ID: "x"})
		if !errors.Is(err, machine.ErrAlreadyClaimed) {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("other answers are errors", func(t *testing.T) {
		got := make(chan machine.Claim, 1)
		err := machine.Deliver(context.Background(), func(context.Context, int) (net.Conn, error) {
			return fakeProgram(t, http.StatusInternalServerError, got), nil
		}, machine.Claim{ID: "x"})
		if err == nil || errors.Is(err, machine.ErrAlreadyClaimed) {
			t.Fatalf("err %v", err)
		}
	})
}
