package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/cocoonstack/sandbox-operator/tools/scale/procstat"
)

// The watch phase's synthetic node and namespace.
const (
	watchNamespace = "scale-watch"
	watchNode      = "scale-watch-node"
	// watchDrainTimeout bounds the wait for the last events after the
	// last write.
	watchDrainTimeout = 30 * time.Second
	// watchIDBase keeps the watch entries' sandboxd ids apart from every
	// other synthetic entry's.
	watchIDBase = 1 << 40
)

// WatchResults is the watch phase: how long a change to a NodeInventory
// takes to reach watchers of sandboxes through the kube-apiserver.
type WatchResults struct {
	// Events is the writes per level, IntervalSeconds their spacing.
	Events          int          `json:"events"`
	IntervalSeconds float64      `json:"intervalSeconds"`
	Levels          []WatchLevel `json:"levels"`
}

// WatchLevel is one number of concurrent watchers.
type WatchLevel struct {
	Watchers int `json:"watchers"`
	// EstablishSeconds is how long opening every watch took.
	EstablishSeconds float64 `json:"establishSeconds"`
	// Latency is, over every (watcher, event) pair received, the time from
	// just before the NodeInventory write was sent to the watcher
	// receiving the ADDED event for the new entry.
	Latency Distribution `json:"latency"`
	// WriteAck is how long the NodeInventory write (a server-side apply)
	// took to be acknowledged.
	WriteAck Distribution `json:"writeAck"`
	// Expected is watchers × events; Missed the pairs never received
	// (should be 0); ClosedWatches the watches the server ended before the
	// level was over.
	Expected      int `json:"expected"`
	Missed        int `json:"missed"`
	ClosedWatches int `json:"closedWatches"`
	// Unexpected counts events other than ADDED for the level's entries
	// (bookmarks and errors included) that the watchers received.
	Unexpected int `json:"unexpected"`
	// UnexpectedSamples are a few of them, as "TYPE namespace/name".
	UnexpectedSamples []string `json:"unexpectedSamples,omitempty"`
	// ServerCPUSeconds is the sandbox-apiserver's CPU time from the first
	// write to the last event received; ServerRSSBytes its resident set
	// then.
	ServerCPUSeconds float64 `json:"serverCPUSeconds"`
	ServerRSSBytes   uint64  `json:"serverRSSBytes"`
}

func runWatchPhase(ctx context.Context, e *Env, cfg Config, log func(string, ...any)) (res *WatchResults, err error) {
	interval := time.Duration(cfg.WatchIntervalSeconds * float64(time.Second))
	res = &WatchResults{Events: cfg.WatchEvents, IntervalSeconds: interval.Seconds()}
	nd, err := newSyntheticNode(e.direct, watchNode)
	if err != nil {
		return res, err
	}
	if err := nd.publish(ctx); err != nil {
		return res, err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		if delErr := nd.delete(dctx); delErr != nil && err == nil {
			err = delErr
		}
	}()
	seq := watchIDBase
	for _, w := range cfg.Watchers {
		lv, err := watchLevel(ctx, e, nd, w, cfg.WatchEvents, interval, &seq)
		res.Levels = append(res.Levels, lv)
		if err != nil {
			return res, fmt.Errorf("watch with %d watchers: %w", w, err)
		}
		log("watch: %4d watchers: p50 %.1fms p95 %.1fms p99 %.1fms max %.1fms, missed %d of %d, closed %d",
			w, lv.Latency.P50*1e3, lv.Latency.P95*1e3, lv.Latency.P99*1e3, lv.Latency.Max*1e3, lv.Missed, lv.Expected, lv.ClosedWatches)
	}
	return res, nil
}

// watcherLog is what one watcher received: the arrival of the ADDED event
// of each write, by write index.
type watcherLog struct {
	arrivals   []time.Time
	unexpected int
	samples    []string
	closed     bool
}

// watchLevel opens w watchers, makes the writes and collects the delays.
func watchLevel(ctx context.Context, e *Env, nd *syntheticNode, w, events int, interval time.Duration, seq *int) (WatchLevel, error) {
	lv := WatchLevel{Watchers: w, Expected: w * events}
	// Start from an empty node, so the level's entries are its own.
	nd.inv.Entries = nil
	if err := nd.publish(ctx); err != nil {
		return lv, err
	}
	if err := e.waitListed(ctx, watchNamespace, 0, pollEvery, time.Minute); err != nil {
		return lv, err
	}
	list, err := e.sandboxes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return lv, fmt.Errorf("list before watching: %w", err)
	}
	rv := list.GetResourceVersion()
	prefix := fmt.Sprintf("ev-%d-", w)

	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	logs := make([]*watcherLog, w)
	var received atomic.Int64
	// warmup is a write made before the timed ones; once every watcher
	// has received it, the watches are serving, and the first timed
	// write's delay is not the watches' start-up.
	warmup := prefix + "warmup"
	var warmed atomic.Int64
	allWarm := make(chan struct{})
	var wg sync.WaitGroup
	began := time.Now()
	for i := range w {
		wi, err := e.sandboxes.Watch(wctx, metav1.ListOptions{ResourceVersion: rv})
		if err != nil {
			cancel()
			wg.Wait()
			return lv, fmt.Errorf("open watch %d of %d: %w", i+1, w, err)
		}
		l := &watcherLog{arrivals: make([]time.Time, events)}
		logs[i] = l
		wg.Go(func() {
			defer wi.Stop()
			sawWarmup := false
			for ev := range wi.ResultChan() {
				if wctx.Err() != nil {
					// Cancelled: client-go reports the interrupted read
					// as an ERROR event, which is not the server's.
					break
				}
				now := time.Now()
				if u, ok := ev.Object.(*unstructured.Unstructured); ok && u.GetNamespace() == watchNamespace && u.GetName() == warmup {
					// Counted once per watcher; not one of the timed writes.
					if ev.Type == watch.Added && !sawWarmup {
						sawWarmup = true
						if warmed.Add(1) == int64(w) {
							close(allWarm)
						}
					}
					continue
				}
				k := eventIndex(ev, prefix, events)
				if ev.Type != watch.Added || k < 0 || !l.arrivals[k].IsZero() {
					l.unexpected++
					if len(l.samples) < 3 {
						l.samples = append(l.samples, describeEvent(ev))
					}
					continue
				}
				l.arrivals[k] = now
				received.Add(1)
			}
			l.closed = wctx.Err() == nil
		})
	}
	lv.EstablishSeconds = time.Since(began).Seconds()
	nd.add(watchNamespace, warmup, *seq)
	*seq++
	if err := nd.publish(ctx); err != nil {
		cancel()
		wg.Wait()
		return lv, err
	}
	select {
	case <-allWarm:
	case <-time.After(watchDrainTimeout):
		cancel()
		wg.Wait()
		return lv, fmt.Errorf("%d of %d watchers received the warm-up write within %v", warmed.Load(), w, watchDrainTimeout)
	case <-ctx.Done():
		cancel()
		wg.Wait()
		return lv, ctx.Err()
	}

	before, err := e.serverUsage()
	if err != nil {
		return lv, err
	}
	sent := make([]time.Time, events)
	acks := make([]float64, 0, events)
	next := time.Now()
	for k := range events {
		// The load's pace: one write every interval, the rate measured.
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		next = next.Add(interval)
		nd.add(watchNamespace, prefix+strconv.Itoa(k), *seq)
		*seq++
		sent[k] = time.Now()
		if err := nd.publish(ctx); err != nil {
			return lv, err
		}
		acks = append(acks, time.Since(sent[k]).Seconds())
	}
	want := int64(w * events)
	dctx, dcancel := context.WithTimeout(ctx, watchDrainTimeout)
	_ = wait.PollUntilContextCancel(dctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return received.Load() >= want, nil
	})
	dcancel()
	after, err := e.serverUsage()
	if err != nil {
		return lv, err
	}
	cancel()
	wg.Wait()

	lv.WriteAck = summarize(acks)
	lv.ServerCPUSeconds = procstat.CPUDelta(before, after)
	lv.ServerRSSBytes = after.RSSBytes
	var samples []float64
	for _, l := range logs {
		for k, at := range l.arrivals {
			if at.IsZero() {
				lv.Missed++
				continue
			}
			samples = append(samples, at.Sub(sent[k]).Seconds())
		}
		lv.Unexpected += l.unexpected
		for _, d := range l.samples {
			if len(lv.UnexpectedSamples) < 5 && !slices.Contains(lv.UnexpectedSamples, d) {
				lv.UnexpectedSamples = append(lv.UnexpectedSamples, d)
			}
		}
		if l.closed {
			lv.ClosedWatches++
		}
	}
	lv.Latency = summarize(samples)
	return lv, ctx.Err()
}

// eventIndex returns k for an event about watchNamespace/<prefix><k>, or
// -1.
func eventIndex(ev watch.Event, prefix string, events int) int {
	u, ok := ev.Object.(*unstructured.Unstructured)
	if !ok || u.GetNamespace() != watchNamespace {
		return -1
	}
	rest, ok := strings.CutPrefix(u.GetName(), prefix)
	if !ok {
		return -1
	}
	k, err := strconv.Atoi(rest)
	if err != nil || k < 0 || k >= events {
		return -1
	}
	return k
}

// describeEvent is "TYPE namespace/name" (or the object's type).
func describeEvent(ev watch.Event) string {
	if u, ok := ev.Object.(*unstructured.Unstructured); ok {
		return fmt.Sprintf("%s %s/%s", ev.Type, u.GetNamespace(), u.GetName())
	}
	if st, ok := ev.Object.(*metav1.Status); ok {
		return fmt.Sprintf("%s %d %s: %s", ev.Type, st.Code, st.Reason, st.Message)
	}
	return fmt.Sprintf("%s %T", ev.Type, ev.Object)
}
