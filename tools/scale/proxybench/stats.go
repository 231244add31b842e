package proxybench

import (
	"slices"
	"time"

	"github.com/cocoonstack/sandbox-operator/tools/scale/stats"
)

// Latency summarizes a series of request durations.
type Latency struct {
	Count  int     `json:"count"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	MeanMs float64 `json:"mean_ms"`
	MinMs  float64 `json:"min_ms"`
	MaxMs  float64 `json:"max_ms"`
	// ReusedConnections is how many of the requests went over a
	// connection the client already had open (net/http/httptrace).
	ReusedConnections int `json:"reused_connections"`
}

// summarize computes the percentiles of samples by nearest rank: the
// p-th percentile is the smallest sample that at least p% of the samples
// do not exceed.
func summarize(samples []time.Duration) Latency {
	if len(samples) == 0 {
		return Latency{}
	}
	s := slices.Clone(samples)
	slices.Sort(s)
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{
		Count:  len(s),
		P50Ms:  ms(stats.Percentile(s, 50)),
		P95Ms:  ms(stats.Percentile(s, 95)),
		P99Ms:  ms(stats.Percentile(s, 99)),
		MeanMs: ms(sum / time.Duration(len(s))),
		MinMs:  ms(s[0]),
		MaxMs:  ms(s[len(s)-1]),
	}
}

// Throughput is a bulk transfer's rate over several repeats, in MB/s
// (10^6 bytes a second).
type Throughput struct {
	MedianMBps float64   `json:"median_mb_s"`
	RunsMBps   []float64 `json:"runs_mb_s"`
}

func throughput(bytes int64, durations []time.Duration) Throughput {
	t := Throughput{}
	for _, d := range durations {
		t.RunsMBps = append(t.RunsMBps, mbps(bytes, d))
	}
	t.MedianMBps = stats.Median(t.RunsMBps)
	return t
}

func mbps(bytes int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(bytes) / 1e6 / d.Seconds()
}

// ratio is a/b, or 0 when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
