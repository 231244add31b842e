package warmpool_test

import (
	"bufio"
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
	"github.com/cocoonstack/sandbox-operator/src/testing/poll"
	"github.com/cocoonstack/sandbox-operator/src/warmpool"
)

// writeRequests sums the kube-apiserver's apiserver_request_total for the
// write verbs, in all and per resource.
func writeRequests(b *testing.B, e *env) (int, map[string]int) {
	raw, err := e.c.Clientset().Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading /metrics: %v", err)
	}
	total, per := 0, map[string]int{}
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		labels, value, ok := strings.Cut(line[len("apiserver_request_total{"):], "} ")
		if !ok {
			continue
		}
		verb, resource := label(labels, "verb"), label(labels, "resource")
		switch verb {
		case "POST", "PUT", "PATCH", "DELETE", "APPLY", "CREATE", "UPDATE":
		default:
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		total += int(n)
		per[resource] += int(n)
	}
	return total, per
}

func label(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// allAt reports whether every live node holds its share of key as target
// (and, with warm, as warm VMs too).
func allAt(f *simfleet.Fleet, key sandbox.PoolKey, replicas int, warm bool) bool {
	var names []string
	for _, n := range f.Nodes() {
		names = append(names, n.Name())
	}
	want := warmpool.Place(key, replicas, names)
	for _, n := range f.Nodes() {
		c, err := sandboxd.New(n.Addr(), sandboxd.WithToken(token))
		if err != nil {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		info, err := c.Info(ctx)
		cancel()
		if err != nil {
			return false
		}
		row, _ := info.Pool(key)
		if row.Target != want[n.Name()] || (warm && row.Warm != want[n.Name()]) {
			return false
		}
	}
	return true
}

// BenchmarkScaleTo50000 times one SandboxWarmPool patch from 0 to 50 000
// replicas over 20 simulated nodes (refill delay 0): until every node's
// target is its share ("target-s") and until every node holds that many
// warm VMs ("warm-s"), and counts the writes the kube-apiserver took in
// that time ("apiserver-writes", of which "pool-status-writes" and
// "event-writes" are the driver's own).
func BenchmarkScaleTo50000(b *testing.B) {
	const nodes, replicas = 20, 50000
	e := startEnv(b)
	ns := e.namespace(b, "bench")
	f, err := simfleet.Start(context.Background(), simfleet.Config{
		Nodes: nodes, NamePrefix: "bench-", RootToken: token,
		RefillConcurrency: 4096, EchoPorts: []int{},
		Publish: &simfleet.PublishConfig{Client: e.c.Dynamic(), Interval: 30 * time.Second},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = f.Close() })
	key := keyOf("bench:1")
	e.apply(b, ns, "bench", key.Template, 0)
	d, err := warmpool.New(warmpool.Config{
		RESTConfig: e.c.AdminConfig(), Nodes: e.store, Token: token,
		SyncInterval: time.Second, LeaseNamespace: ns, Identity: "bench", Logger: logger,
	})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = d.Run(ctx) }()
	b.Cleanup(func() { cancel(); <-done })
	// A pool of 50 000 takes minutes to fill on two cores; the bound is
	// the benchmark's, not the machine's.
	wait := func(what string, cond func() bool) { b.Helper(); poll.UntilWithin(b, 5*time.Minute, what, cond) }
	wait("all 20 nodes in the fleet view", func() bool { return len(e.store.Nodes()) == nodes })
	wait("driver leads", d.Leading)
	wait("empty pools placed", func() bool { return allAt(f, key, 0, false) })

	var targetSum, warmSum time.Duration
	var writes, statusWrites, eventWrites int
	b.ResetTimer()
	for range b.N {
		before, perBefore := writeRequests(b, e)
		start := time.Now()
		e.scale(b, ns, "bench", replicas)
		wait("targets set", func() bool { return allAt(f, key, replicas, false) })
		targetSum += time.Since(start)
		wait("warm reached", func() bool { return allAt(f, key, replicas, true) })
		warmSum += time.Since(start)
		after, perAfter := writeRequests(b, e)
		writes += after - before
		statusWrites += perAfter["sandboxwarmpools"] - perBefore["sandboxwarmpools"]
		eventWrites += perAfter["events"] - perBefore["events"]

		b.StopTimer()
		e.scale(b, ns, "bench", 0)
		wait("scaled back to 0", func() bool { return allAt(f, key, 0, false) })
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(targetSum.Seconds()/n, "target-s")
	b.ReportMetric(warmSum.Seconds()/n, "warm-s")
	b.ReportMetric(float64(writes)/n, "apiserver-writes")
	b.ReportMetric(float64(statusWrites)/n, "pool-writes")
	b.ReportMetric(float64(eventWrites)/n, "event-writes")
}
