package fill_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tools/scale/fill"
)

// TestRunSmoke runs the measurement at a tiny size against a fresh
// cluster. The sizes can be raised by hand to run the real thing without
// the harness, e.g.
//
//	SCALE_FILL_NODES=1000 SCALE_FILL_REPLICAS=50000 SCALE_FILL_RUNS=3 \
//	SCALE_FILL_POLL_CONCURRENCY=64 SCALE_FILL_OBSERVE=info go test -run TestRunSmoke -v -timeout 60m ./tools/scale/fill/
func TestRunSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver and a simulated fleet")
	}
	cfg := fill.Config{
		Nodes:    envInt(t, "SCALE_FILL_NODES", 3),
		Replicas: envInt(t, "SCALE_FILL_REPLICAS", 30),
		Runs:     envInt(t, "SCALE_FILL_RUNS", 2),
		// 0 leaves the default.
		PollConcurrency: envInt(t, "SCALE_FILL_POLL_CONCURRENCY", 0),
		Observe:         os.Getenv("SCALE_FILL_OBSERVE"),
		Logf:            t.Logf,
	}
	cfg.Cluster = cluster.Start(t)
	res, err := fill.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	t.Logf("result:\n%s", out)
	if res.Nodes != cfg.Nodes || res.Replicas != cfg.Replicas || len(res.Runs) != cfg.Runs {
		t.Fatalf("result does not match the config %+v", cfg)
	}
	for i, r := range res.Runs {
		if r.TargetS <= 0 || r.WarmS < r.TargetS {
			t.Errorf("run %d: target %vs, warm %vs", i, r.TargetS, r.WarmS)
		}
		// At least the patch itself went through the kube-apiserver.
		if r.Writes.ByResource["sandboxwarmpools"] < 1 || r.DriverPuts < 1 {
			t.Errorf("run %d: writes %+v, driver PUTs %d", i, r.Writes, r.DriverPuts)
		}
	}
	if res.ShareMin*cfg.Nodes > cfg.Replicas || res.ShareMax*cfg.Nodes < cfg.Replicas {
		t.Errorf("shares %d..%d cannot add up to %d over %d nodes", res.ShareMin, res.ShareMax, cfg.Replicas, cfg.Nodes)
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q: want a count", name, v)
	}
	return n
}
