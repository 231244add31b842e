package proxybench_test

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tools/scale/proxybench"
)

// TestRunSmoke runs the measurement at a tiny size against a fresh
// cluster and the real sandbox-envd-proxy binary (SANDBOX_ENVD_PROXY, or
// built with go build). The sizes can be raised by hand to run the real
// thing without the harness, e.g. with the defaults:
//
//	SCALE_PROXYBENCH_REQUESTS=2000 SCALE_PROXYBENCH_BULK_MIB=64 \
//	  go test -run TestRunSmoke -v ./tools/scale/proxybench/
func TestRunSmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a kube-apiserver, a simulated node and sandbox-envd-proxy")
	}
	cfg := proxybench.Config{
		Requests:       envInt(t, "SCALE_PROXYBENCH_REQUESTS", 50),
		WarmupRequests: envInt(t, "SCALE_PROXYBENCH_WARMUP", 10),
		BulkBytes:      int64(envInt(t, "SCALE_PROXYBENCH_BULK_MIB", 1)) << 20,
		BulkRepeats:    envInt(t, "SCALE_PROXYBENCH_BULK_REPEATS", 3),
		Logf:           t.Logf,
	}
	cfg.Cluster = cluster.Start(t)
	res, err := proxybench.Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := json.MarshalIndent(res, "", "  ")
	t.Logf("result:\n%s", out)
	for name, p := range map[string]proxybench.Path{"direct": res.Direct, "proxied": res.Proxied, "direct_reused_relay": res.DirectReusedRelay, "floor": res.Floor} {
		if p.Latency.Count != cfg.Requests || p.Latency.P50Ms <= 0 || p.Latency.P99Ms < p.Latency.P50Ms {
			t.Errorf("%s latency %+v", name, p.Latency)
		}
	}
	for name, p := range map[string]proxybench.Path{"direct": res.Direct, "proxied": res.Proxied} {
		if p.Download == nil || p.Upload == nil || p.Download.MedianMBps <= 0 || p.Upload.MedianMBps <= 0 {
			t.Errorf("%s throughput %+v %+v", name, p.Download, p.Upload)
		}
	}
	// What each path reuses is what the package comment says.
	if res.Direct.Latency.ReusedConnections != 0 {
		t.Errorf("the direct path reused %d relays", res.Direct.Latency.ReusedConnections)
	}
	for name, p := range map[string]proxybench.Path{"proxied": res.Proxied, "direct_reused_relay": res.DirectReusedRelay, "floor": res.Floor} {
		if p.Latency.ReusedConnections < cfg.Requests-1 {
			t.Errorf("%s: keep-alive reused %d of %d connections", name, p.Latency.ReusedConnections, cfg.Requests)
		}
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}
