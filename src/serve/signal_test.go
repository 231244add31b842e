package serve_test

import (
	"syscall"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/serve"
)

func TestSignalContextEndsOnSIGTERM(t *testing.T) {
	ctx := serve.SignalContext()
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("SIGTERM did not end the context")
	}
}
