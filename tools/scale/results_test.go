package main

import (
	"math"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tools/scale/stats"
)

func TestPercentile(t *testing.T) {
	sorted := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for _, tc := range []struct {
		p    float64
		want float64
	}{
		{1, 1}, {10, 1}, {11, 2}, {50, 5}, {51, 6}, {95, 10}, {99, 10}, {100, 10},
	} {
		if got := stats.Percentile(sorted, tc.p); got != tc.want {
			t.Errorf("stats.Percentile(1..10, %v) = %v, want %v", tc.p, got, tc.want)
		}
	}
	if got := stats.Percentile([]float64(nil), 50); got != 0 {
		t.Errorf("percentile of nothing = %v, want 0", got)
	}
	if got := stats.Percentile([]float64{7}, 99); got != 7 {
		t.Errorf("percentile of one sample = %v, want 7", got)
	}
	// 100 samples: p99 is the 99th, not the maximum.
	hundred := make([]float64, 100)
	for i := range hundred {
		hundred[i] = float64(i + 1)
	}
	if got := stats.Percentile(hundred, 99); got != 99 {
		t.Errorf("p99 of 1..100 = %v, want 99", got)
	}
}

func TestMedian(t *testing.T) {
	in := []float64{3, 1, 2}
	if got := median(in); got != 2 {
		t.Errorf("median(3,1,2) = %v, want 2", got)
	}
	if in[0] != 3 {
		t.Error("median sorted its input in place")
	}
	if got := median([]float64{4, 1, 3, 2}); got != 2 {
		t.Errorf("median of four = %v, want the lower middle 2", got)
	}
}

func TestSummarize(t *testing.T) {
	d := summarize([]float64{0.3, 0.1, 0.2, 0.4})
	want := Distribution{Count: 4, Min: 0.1, Mean: 0.25, P50: 0.2, P95: 0.4, P99: 0.4, Max: 0.4}
	if d.Count != want.Count || d.Min != want.Min || math.Abs(d.Mean-want.Mean) > 1e-12 ||
		d.P50 != want.P50 || d.P95 != want.P95 || d.P99 != want.P99 || d.Max != want.Max {
		t.Errorf("summarize = %+v, want %+v", d, want)
	}
	if (summarize(nil) != Distribution{}) {
		t.Error("summarize(nil) is not zero")
	}
}

func TestMachineInfo(t *testing.T) {
	m := machineInfo()
	if m.Cores < 1 || m.GoVersion == "" || m.ClockTicks < 1 {
		t.Errorf("machineInfo = %+v", m)
	}
	if m.MemoryBytes == 0 || m.Kernel == "" {
		t.Errorf("machineInfo read no memory or kernel from /proc: %+v", m)
	}
}
