package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/simulator/isolate"
	"github.com/cocoonstack/sandbox-operator/src/simulator/rootfs"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/src/testing/syncbuf"
)

// TestMain lets the test binary be the init of the isolated sandboxes run
// starts, as main is for the binary.
func TestMain(m *testing.M) {
	isolate.Init()
	os.Exit(m.Run())
}

// TestRefusesUnisolatedUnlessAsked: without the base root filesystem the
// simulator refuses to start and names --unisolated; with it, it starts
// and says on stderr that sandboxes are not isolated.
func TestRefusesUnisolatedUnlessAsked(t *testing.T) {
	t.Setenv(rootfs.EnvVar, filepath.Join(t.TempDir(), "missing"))
	var stdout, stderr syncbuf.Buffer
	if code := run(context.Background(), []string{"--scratch-dir", t.TempDir()}, &stdout, &stderr); code != exitFailure ||
		!strings.Contains(stderr.String(), "cannot be isolated") || !strings.Contains(stderr.String(), "--unisolated") {
		t.Fatalf("exit %d, stderr %q; want a refusal that names --unisolated", code, stderr.String())
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	stdout, stderr = syncbuf.Buffer{}, syncbuf.Buffer{}
	go func() { done <- run(ctx, []string{"--unisolated", "--scratch-dir", t.TempDir()}, &stdout, &stderr) }()
	poll.UntilNil(t, "the unisolated fleet to come up", func() error {
		if !strings.Contains(stdout.String(), "NODE ") {
			return fmt.Errorf("stderr %q", stderr.String())
		}
		return nil
	})
	cancel()
	if code := <-done; code != exitOK {
		t.Fatalf("exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stderr.String(), "--unisolated: sandboxes are ordinary processes") {
		t.Errorf("an unisolated start does not say so: %q", stderr.String())
	}
}
