package stats

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	s := []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	for p, want := range map[float64]float64{0: 1, 10: 1, 50: 5, 95: 10, 99: 10, 100: 10} {
		if got := Percentile(s, p); got != want {
			t.Errorf("Percentile(%v) = %v, want %v", p, got, want)
		}
	}
	if got := Percentile([]time.Duration{time.Millisecond, 2 * time.Millisecond}, 50); got != time.Millisecond {
		t.Errorf("duration p50 = %v", got)
	}
	if got := Percentile([]float64(nil), 50); got != 0 {
		t.Errorf("empty p50 = %v", got)
	}
}

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{{nil, 0}, {[]float64{3}, 3}, {[]float64{4, 1, 3}, 3}, {[]float64{4, 1, 3, 2}, 2.5}} {
		if got := Median(c.in); got != c.want {
			t.Errorf("Median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}
