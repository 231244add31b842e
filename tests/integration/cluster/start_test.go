package cluster_test

import (
	"strings"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
)

// TestStartFailsWithTheAPIServerLog checks the failure path every later
// test depends on for diagnosis: a kube-apiserver that cannot start makes
// StartContext return promptly (not at the start timeout) with the
// process's own complaint in the error.
func TestStartFailsWithTheAPIServerLog(t *testing.T) {
	_, err := cluster.StartContext(t.Context(), t.TempDir(), cluster.WithAPIServerFlags("--no-such-flag"))
	if err == nil {
		t.Fatal("StartContext with an unknown kube-apiserver flag succeeded")
	}
	for _, want := range []string{"exited before it was ready", "unknown flag: --no-such-flag"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

// BenchmarkStart measures a cluster's start-up (etcd, kube-apiserver ready,
// bootstrap objects) and shutdown, the fixed cost of every integration test
// that uses one.
func BenchmarkStart(b *testing.B) {
	bin, err := cluster.APIServerBinary()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		c, err := cluster.StartContext(b.Context(), b.TempDir(), cluster.WithAPIServerBinary(bin))
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Stop(); err != nil {
			b.Fatal(err)
		}
	}
}
