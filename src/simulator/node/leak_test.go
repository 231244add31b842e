package node_test

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
)

// Close must end every goroutine the node started: server, refill, reaper,
// guests and relays, including a relay still open at the time.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	base := runtime.NumGoroutine()
	cfg := testConfig()
	cfg.RefillDelay = time.Millisecond
	n, err := node.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	waitWarm(t, n, baseKey, 4)
	ctx := ctxT(t)
	root := client(t, n, rootToken)
	cl, err := root.Claim(ctx, sandboxd.ClaimRequest{Template: tmpl})
	if err != nil {
		t.Fatal(err)
	}
	for _, h2 := range []bool{false, true} {
		echoRoundTrip(t, transportOver(root.As(cl.Token), cl.ID, echoPort, h2))
	}
	open, err := root.As(cl.Token).DialPort(ctx, cl.ID, echoPort)
	if err != nil {
		t.Fatal(err)
	}
	defer open.Close()

	if err := n.Close(); err != nil {
		t.Fatal(err)
	}
	// The open relay is cut by the node.
	_ = open.SetDeadline(time.Now().Add(waitTimeout))
	if _, err := io.ReadAll(open); err != nil && !isClosedErr(err) {
		t.Fatalf("relay after close: %v", err)
	}
	_ = open.Close()
	poll.UntilNil(t, "the node's goroutines to end", func() error {
		if left := runtime.NumGoroutine(); left > base {
			return goroutinesLeft{left: left, base: base}
		}
		return nil
	})
}

// goroutinesLeft takes the goroutines' stacks only when a failure prints
// it, not on every poll.
type goroutinesLeft struct{ left, base int }

func (e goroutinesLeft) Error() string {
	buf := make([]byte, 1<<20)
	return fmt.Sprintf("%d goroutines left (baseline %d):\n%s", e.left, e.base, buf[:runtime.Stack(buf, true)])
}
