package fill

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
	"github.com/cocoonstack/sandbox-operator/src/simulator/simfleet"
)

// infoTimeout bounds one GET /v1/info; a node that misses it is asked
// again on the next sweep.
const infoTimeout = 10 * time.Second

// minSweepInterval spaces the sweeps of a small fleet, which finish in a
// millisecond, so the poller does not spin on the shared cores; it is
// also the best time resolution a wait has.
const minSweepInterval = 5 * time.Millisecond

// PollStats describes the polling of one wait.
type PollStats struct {
	// Sweeps is how many rounds over the nodes not done yet were made.
	Sweeps int `json:"sweeps"`
	// Requests is how many GET /v1/info were sent, Errors how many of
	// them failed (the node was asked again on the next sweep).
	Requests int `json:"requests"`
	Errors   int `json:"errors"`
	// PeriodMs is the mean time from one sweep's start to the next's (a
	// single sweep's duration when one was enough): a node's change is
	// seen at most about this late.
	PeriodMs float64 `json:"period_ms"`
	// FullSweepMs is how long the first sweep, which reads every node,
	// took.
	FullSweepMs float64 `json:"full_sweep_ms"`
}

// readFunc reads node i's row for the polled pool key; a node without
// the pool answers a zero row.
type readFunc func(ctx context.Context, i int) (sandboxd.PoolStatus, error)

// nodePoller reads one pool key's row from every node, at most
// concurrency reads at once, so that polling a thousand nodes does not
// itself load the machine it measures more than it must.
type nodePoller struct {
	names       []string
	read        readFunc
	concurrency int
	stop        func() // releases what the reads hold
}

// newInfoPoller reads each node's sandboxd GET /v1/info, as the driver
// and any client see the node.
func newInfoPoller(names, addrs []string, token string, key sandbox.PoolKey, concurrency int) (*nodePoller, error) {
	// One idle connection per node kept across sweeps; the shared
	// sandboxd transport keeps at most 1024 in all, fewer than a large
	// fleet has nodes.
	tr := &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        0, // no overall limit
		MaxIdleConnsPerHost: 1,
		IdleConnTimeout:     2 * time.Minute,
	}
	hc := &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	clients := make([]*sandboxd.Client, len(addrs))
	for i, addr := range addrs {
		c, err := sandboxd.New(addr, sandboxd.WithToken(token), sandboxd.WithHTTPClient(hc))
		if err != nil {
			return nil, fmt.Errorf("sandboxd client for node %s: %w", names[i], err)
		}
		clients[i] = c
	}
	read := func(ctx context.Context, i int) (sandboxd.PoolStatus, error) {
		ctx, cancel := context.WithTimeout(ctx, infoTimeout)
		defer cancel()
		info, err := clients[i].Info(ctx)
		if err != nil {
			return sandboxd.PoolStatus{}, err
		}
		row, _ := info.Pool(key)
		return row, nil
	}
	return &nodePoller{names: names, read: read, concurrency: max(concurrency, 1), stop: tr.CloseIdleConnections}, nil
}

// newSnapshotPoller reads each simulated node's state in this process
// (node.Snapshot): no HTTP and no JSON, a small fraction of an Info
// request's cost, for a figure the polling inflates least. One reader is
// enough: nothing waits on the network.
func newSnapshotPoller(f *simfleet.Fleet, key sandbox.PoolKey) *nodePoller {
	nodes := f.Nodes()
	names := make([]string, len(nodes))
	for i, n := range nodes {
		names[i] = n.Name()
	}
	key = key.WithDefaults()
	read := func(_ context.Context, i int) (sandboxd.PoolStatus, error) {
		for _, p := range nodes[i].Snapshot().Pools {
			if (sandbox.PoolKey{Template: p.Template, Net: p.Net, Size: p.Size}) == key {
				return sandboxd.PoolStatus{Key: key, Warm: p.Warm, Target: p.Target}, nil
			}
		}
		return sandboxd.PoolStatus{}, nil
	}
	return &nodePoller{names: names, read: read, concurrency: 1, stop: func() {}}
}

// observation is one node's pool row as read at a moment.
type observation struct {
	row sandboxd.PoolStatus
	at  time.Time
	err error
}

// sweep reads the nodes at indexes, concurrently up to p.concurrency.
func (p *nodePoller) sweep(ctx context.Context, indexes []int) []observation {
	out := make([]observation, len(indexes))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(p.concurrency, len(indexes)) {
		wg.Go(func() {
			for j := range next {
				row, err := p.read(ctx, indexes[j])
				out[j] = observation{row: row, at: time.Now(), err: err}
			}
		})
	}
	for j := range indexes {
		next <- j
	}
	close(next)
	wg.Wait()
	return out
}

// reached is when a wait first saw each condition hold on every node.
type reached struct {
	// target is when the last node was seen with its share as target,
	// warm when the last node was seen holding its share warm.
	target, warm time.Time
	stats        PollStats
}

// await polls until every node has been seen with target == want[name]
// and, in the same or a later read, with target and warm both at it. A
// node already seen in a state is not asked about it again: the driver
// sets a node's target once per change and, with no claims, the warm
// count only rises to it. It fails once timeout passes or ctx ends.
func (p *nodePoller) await(ctx context.Context, want map[string]int, timeout time.Duration) (reached, error) {
	deadline := time.Now().Add(timeout)
	targetPending := make(map[int]bool, len(p.names))
	warmPending := make(map[int]bool, len(p.names))
	for i := range p.names {
		targetPending[i], warmPending[i] = true, true
	}
	var r reached
	var lastErr error
	var first time.Time
	for {
		start := time.Now()
		if first.IsZero() {
			first = start
		}
		var indexes []int
		for i := range p.names {
			if targetPending[i] || warmPending[i] {
				indexes = append(indexes, i)
			}
		}
		obs := p.sweep(ctx, indexes)
		r.stats.Sweeps++
		r.stats.Requests += len(indexes)
		if r.stats.Sweeps == 1 {
			r.stats.FullSweepMs = ms(time.Since(start))
		}
		for j, o := range obs {
			i := indexes[j]
			if o.err != nil {
				r.stats.Errors++
				lastErr = o.err
				continue
			}
			share := want[p.names[i]]
			if targetPending[i] && o.row.Target == share {
				delete(targetPending, i)
				r.target = later(r.target, o.at)
			}
			if warmPending[i] && o.row.Target == share && o.row.Warm == share {
				delete(warmPending, i)
				r.warm = later(r.warm, o.at)
			}
		}
		if len(targetPending) == 0 && len(warmPending) == 0 {
			if r.stats.Sweeps == 1 {
				r.stats.PeriodMs = r.stats.FullSweepMs
			} else {
				r.stats.PeriodMs = ms(start.Sub(first)) / float64(r.stats.Sweeps-1)
			}
			return r, nil
		}
		if err := ctx.Err(); err != nil {
			return r, fmt.Errorf("waiting for the nodes: %w", err)
		}
		if time.Now().After(deadline) {
			return r, fmt.Errorf("after %v, %d of %d nodes not seen at their target and %d not holding it warm (last read error: %v)",
				timeout, len(targetPending), len(p.names), len(warmPending), lastErr)
		}
		if rest := minSweepInterval - time.Since(start); rest > 0 {
			time.Sleep(rest)
		}
	}
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
