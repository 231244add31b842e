package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cocoonstack/sandbox-operator/tests/cluster"
	"github.com/cocoonstack/sandbox-operator/tools/scale/procstat"
	"github.com/cocoonstack/sandbox-operator/tools/scale/stats"
	"github.com/cocoonstack/sandbox-operator/tools/scale/writecount"
)

// Phase is one measured step of the workload on one path.
type Phase struct {
	Name string `json:"name"`
	// Count is how many sandboxes (or lists) it measured.
	Count int `json:"count"`
	// Seconds are each one's latency, sorted; P50, P90 and P99 are read
	// from them.
	Seconds       []float64 `json:"seconds"`
	P50, P90, P99 float64
	// AckSeconds are, for creates, each create call's own duration (the
	// API's answer, before the sandbox is Ready), sorted; AckP50 their
	// median.
	AckSeconds []float64 `json:"ackSeconds,omitempty"`
	AckP50     float64
	// Writes are what the kube-apiserver and etcd wrote during the phase;
	// APIWritesPer and EtcdPutsPer are per sandbox.
	Writes       writecount.WriteCounts `json:"writes"`
	APIWritesPer float64                `json:"apiWritesPerSandbox"`
	EtcdPutsPer  float64                `json:"etcdPutsPerSandbox"`
	// CPUSeconds is what each process spent during the phase, by name:
	// the path's control plane and the cluster's components.
	CPUSeconds map[string]float64 `json:"cpuSeconds"`
	// Wall is the phase's duration.
	Wall float64 `json:"wallSeconds"`
}

// summarize sorts the latencies and reads the percentiles from them.
func (ph *Phase) summarize() {
	slices.Sort(ph.Seconds)
	ph.P50, ph.P90, ph.P99 = stats.Percentile(ph.Seconds, 50), stats.Percentile(ph.Seconds, 90), stats.Percentile(ph.Seconds, 99)
	slices.Sort(ph.AckSeconds)
	ph.AckP50 = stats.Percentile(ph.AckSeconds, 50)
}

// PathResults are one path's phases.
type PathResults struct {
	Path   string  `json:"path"`
	Phases []Phase `json:"phases"`
	// Refills are, after each burst, how long until the pool was full
	// again, from the burst's last Ready.
	Refills map[int]float64 `json:"refillSeconds"`
}

// workload runs the same steps on a path.
type workload struct {
	n       *cluster.NodeCluster
	p       path
	cfg     config
	tracker *tracker
	log     func(string, ...any)
	seq     int
}

// measure runs fn between two readings of the writes and of every
// process's CPU, and fills the phase's counts from them.
func (w *workload) measure(ctx context.Context, name string, count int, fn func() (secs, acks []float64, err error)) (Phase, error) {
	pids := w.n.ComponentPIDs()
	for k, v := range w.p.controlPlane() {
		pids[k] = v
	}
	cpuBefore := cpuOf(pids)
	rest := w.n.Clientset().Discovery().RESTClient()
	before, err := writecount.Read(ctx, rest, w.n.EtcdURL())
	if err != nil {
		return Phase{}, err
	}
	began := time.Now()
	secs, acks, err := fn()
	if err != nil {
		return Phase{}, fmt.Errorf("%s: %w", name, err)
	}
	wall := time.Since(began)
	after, err := writecount.Read(ctx, rest, w.n.EtcdURL())
	if err != nil {
		return Phase{}, err
	}
	cpuAfter := cpuOf(pids)
	ph := Phase{Name: name, Count: count, Seconds: secs, AckSeconds: acks, Writes: writecount.Diff(before, after), CPUSeconds: map[string]float64{}, Wall: wall.Seconds()}
	ph.summarize()
	if count > 0 {
		ph.APIWritesPer = ph.Writes.APIWrites / float64(count)
		ph.EtcdPutsPer = ph.Writes.EtcdPuts / float64(count)
	}
	for k, b := range cpuBefore {
		if a, ok := cpuAfter[k]; ok {
			ph.CPUSeconds[k] = a - b
		}
	}
	var cp []string
	for k := range w.p.controlPlane() {
		cp = append(cp, fmt.Sprintf("%s %.2f ms CPU each", k, 1000*ph.CPUSeconds[k]/float64(max(count, 1))))
	}
	w.log("%s, %s: %d, p50 %.1f ms (create answered in %.1f), p99 %.1f ms, %.1f API writes and %.1f etcd puts each, %s",
		w.p.name(), name, count, 1000*ph.P50, 1000*ph.AckP50, 1000*ph.P99, ph.APIWritesPer, ph.EtcdPutsPer, strings.Join(cp, ", "))
	return ph, nil
}

func cpuOf(pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range pids {
		if s, err := procstat.CPUSeconds(pid); err == nil {
			out[name] = s
		}
	}
	return out
}

// waitPoolFull waits until the pool reports every replica ready, as known
// after since (a report older than the last claim would call the pool full
// before it noticed the claim).
func (w *workload) waitPoolFull(ctx context.Context, since time.Time) error {
	for {
		ready, err := w.p.warm(ctx, w.n, since)
		if err == nil && ready >= w.cfg.pool {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the pool has %d of %d ready (%v): %w", ready, w.cfg.pool, err, context.Cause(ctx))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// create asks for count sandboxes at once and returns their names, each
// one's time from its create call to Ready, and each create call's own
// duration.
func (w *workload) create(ctx context.Context, count int) ([]string, []float64, []float64, error) {
	names := make([]string, count)
	starts := make([]time.Time, count)
	acks := make([]float64, count)
	errs := make([]error, count)
	client := w.n.Dynamic().Resource(w.p.requests()).Namespace(namespace)
	var wg sync.WaitGroup
	for i := range count {
		w.seq++
		names[i] = fmt.Sprintf("sb-%05d", w.seq)
		wg.Go(func() {
			starts[i] = time.Now()
			_, errs[i] = client.Create(ctx, w.p.request(names[i]), metav1.CreateOptions{})
			acks[i] = time.Since(starts[i]).Seconds()
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return names, nil, nil, err
		}
	}
	ready, err := w.tracker.waitReady(ctx, names)
	if err != nil {
		return names, nil, nil, err
	}
	secs := make([]float64, count)
	for i, n := range names {
		secs[i] = ready[n].Sub(starts[i]).Seconds()
	}
	return names, secs, acks, nil
}

// remove deletes names at once and returns each one's time from its delete
// call until the object is gone.
func (w *workload) remove(ctx context.Context, names []string) ([]float64, error) {
	starts := make([]time.Time, len(names))
	errs := make([]error, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		wg.Go(func() {
			starts[i] = time.Now()
			errs[i] = deleteRequest(ctx, w.n, w.p, n)
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	gone, err := w.tracker.waitGone(ctx, names)
	if err != nil {
		return nil, err
	}
	secs := make([]float64, len(names))
	for i, n := range names {
		secs[i] = gone[n].Sub(starts[i]).Seconds()
	}
	return secs, nil
}

// run is the workload: claims one at a time, bursts with the pool full
// before each (its refill timed), a list of every sandbox, and a delete of
// the last burst.
func (w *workload) run(ctx context.Context) (*PathResults, error) {
	res := &PathResults{Path: w.p.name(), Refills: map[int]float64{}}
	if err := w.waitPoolFull(ctx, time.Now()); err != nil {
		return nil, err
	}
	var sequential []string
	ph, err := w.measure(ctx, "claim, one at a time", w.cfg.sequential, func() ([]float64, []float64, error) {
		var secs, acks []float64
		for range w.cfg.sequential {
			names, s, a, err := w.create(ctx, 1)
			if err != nil {
				return nil, nil, err
			}
			sequential = append(sequential, names...)
			secs, acks = append(secs, s...), append(acks, a...)
			// Give the pool its Sandbox back before the next, so each
			// claim meets a full pool.
			if err := w.waitPoolFull(ctx, time.Now()); err != nil {
				return nil, nil, err
			}
		}
		return secs, acks, nil
	})
	if err != nil {
		return nil, err
	}
	res.Phases = append(res.Phases, ph)
	if _, err := w.remove(ctx, sequential); err != nil {
		return nil, err
	}

	var last []string
	for i, size := range w.cfg.bursts {
		var names []string
		ph, err := w.measure(ctx, fmt.Sprintf("burst of %d", size), size, func() ([]float64, []float64, error) {
			var secs, acks []float64
			var err error
			names, secs, acks, err = w.create(ctx, size)
			return secs, acks, err
		})
		if err != nil {
			return nil, err
		}
		res.Phases = append(res.Phases, ph)
		burstEnd := time.Now()
		if err := w.waitPoolFull(ctx, time.Now()); err != nil {
			return nil, err
		}
		res.Refills[size] = time.Since(burstEnd).Seconds()
		w.log("%s: the pool refilled %d in %.1f s", w.p.name(), size, res.Refills[size])
		if i < len(w.cfg.bursts)-1 {
			if _, err := w.remove(ctx, names); err != nil {
				return nil, err
			}
			if err := w.waitPoolFull(ctx, time.Now()); err != nil {
				return nil, err
			}
		}
		last = names
	}

	list := w.n.Dynamic().Resource(w.p.sandboxes()).Namespace(namespace)
	ph, err = w.measure(ctx, "list every sandbox", w.cfg.lists, func() ([]float64, []float64, error) {
		var secs []float64
		for range w.cfg.lists {
			began := time.Now()
			l, err := list.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, nil, err
			}
			secs = append(secs, time.Since(began).Seconds())
			if len(l.Items) < len(last) {
				return nil, nil, fmt.Errorf("listed %d sandboxes, want at least %d", len(l.Items), len(last))
			}
		}
		return secs, nil, nil
	})
	if err != nil {
		return nil, err
	}
	res.Phases = append(res.Phases, ph)

	ph, err = w.measure(ctx, fmt.Sprintf("delete %d", len(last)), len(last), func() ([]float64, []float64, error) {
		secs, err := w.remove(ctx, last)
		return secs, nil, err
	})
	if err != nil {
		return nil, err
	}
	res.Phases = append(res.Phases, ph)
	return res, nil
}
