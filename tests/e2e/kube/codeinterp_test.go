package kube_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/node"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// startCodeInterpreterNode starts one simulated node of isolated machines
// with a warm code-interpreter pool on both lanes, publishing its
// NodeInventory into c like the suite's other nodes. The machines need
// the e2b-ci layer, which tools/bazel provisions: without it the test
// fails, it does not skip.
func startCodeInterpreterNode(t *testing.T, c *cluster.Cluster, token, envdSecret, scratch string) *simfleet.Fleet {
	t.Helper()
	iso, err := simfleet.NewIsolation("", fmt.Sprintf("sandbox-operator-kube-e2e-ci-%d", os.Getpid()), nil)
	if err != nil {
		t.Fatalf("the code-interpreter node needs isolated machines: %v", err)
	}
	if iso.CodeInterpreterErr != nil {
		_ = iso.Close()
		t.Fatalf("the code-interpreter layer is missing (tools/bazel provisions it): %v", iso.CodeInterpreterErr)
	}
	// The node's log goes to a file shown when the test fails: its machines
	// are where a code-interpreter failure starts.
	logPath := filepath.Join(scratch+"-log", "sim-ci-node.log")
	if err := os.MkdirAll(filepath.Dir(logPath), 0o700); err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = logFile.Close()
		if t.Failed() {
			if b, err := os.ReadFile(logPath); err == nil {
				t.Logf("code-interpreter node log (warnings and errors):\n%s", b)
			}
		}
	})
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Logger:           slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Nodes:            1,
		NamePrefix:       "sim-ci-node-",
		RootToken:        token,
		EgressAttachment: true,
		EchoPorts:        []int{},
		Isolation:        iso,
		Envd:             &simfleet.EnvdConfig{Secret: []byte(envdSecret)},
		ScratchRoot:      scratch,
		Publish:          &simfleet.PublishConfig{Client: c.Dynamic(), Interval: time.Second},
		Customize: func(_ int, cfg *node.Config) {
			cfg.Pools = []sandboxd.PoolSpec{
				{Template: imageCodeInterpreter, Net: "egress", Warm: 1},
				{Template: imageCodeInterpreter, Net: "none", Warm: 1},
			}
		},
	})
	if err != nil {
		_ = iso.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := f.Close(); err != nil {
			t.Errorf("close the code-interpreter node: %v", err)
		}
		if err := iso.Close(); err != nil {
			t.Errorf("close its machines: %v", err)
		}
	})
	return f
}
