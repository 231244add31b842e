package report

import (
	"errors"
	"math"
	"slices"
	"testing"
)

func TestNiceStep(t *testing.T) {
	tests := []struct {
		raw, want float64
	}{
		{1, 1},
		{1.01, 2},
		{2, 2},
		{2.5, 5},
		{5.1, 10},
		{0.03, 0.05},
		{1000, 1000},
		{1200, 2000},
		{0.1, 0.1},
	}
	for _, tt := range tests {
		if got := niceStep(tt.raw); math.Abs(got-tt.want) > tt.want*1e-12 {
			t.Errorf("niceStep(%g) = %g, want %g", tt.raw, got, tt.want)
		}
	}
}

func TestFloorCeilLog10AtPowersOfTen(t *testing.T) {
	// math.Log10(1000) is just under 3; the helpers must still be exact.
	for e := -300; e <= 300; e++ {
		v := math.Pow10(e)
		if got := floorLog10(v); got != e {
			t.Errorf("floorLog10(1e%d) = %d", e, got)
		}
		if got := ceilLog10(v); got != e {
			t.Errorf("ceilLog10(1e%d) = %d", e, got)
		}
	}
	if got := ceilLog10(1001); got != 4 {
		t.Errorf("ceilLog10(1001) = %d, want 4", got)
	}
	if got := floorLog10(999); got != 2 {
		t.Errorf("floorLog10(999) = %d, want 2", got)
	}
}

func TestLinearAxis(t *testing.T) {
	tests := []struct {
		name       string
		lo, hi     float64
		wantLabels []string
	}{
		{"thousands", 0, 50000, []string{"0", "10k", "20k", "30k", "40k", "50k"}},
		{"mixed units", 0, 3000, []string{"0", "500", "1k", "1.5k", "2k", "2.5k", "3k"}},
		{"fractions", 0, 1, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{"tenths", 12.05, 12.52, []string{"12", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6"}},
		{"negative", -3, 7, []string{"-4", "-2", "0", "2", "4", "6", "8"}},
		{"flat at zero", 0, 0, []string{"0", "0.2", "0.4", "0.6", "0.8", "1"}},
		{"flat", 100, 100, []string{"90", "95", "100", "105", "110"}},
		{"millions", 0, 2.5e6, []string{"0", "500k", "1M", "1.5M", "2M", "2.5M"}},
		{"millis", 0, 0.004, []string{"0", "0.0005", "0.001", "0.0015", "0.002", "0.0025", "0.003", "0.0035", "0.004"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := newAxis(false, tt.lo, tt.hi)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.labels(); !slices.Equal(got, tt.wantLabels) {
				t.Errorf("labels = %q, want %q", got, tt.wantLabels)
			}
			if a.lo > tt.lo || a.hi < tt.hi {
				t.Errorf("domain [%g, %g] does not cover [%g, %g]", a.lo, a.hi, tt.lo, tt.hi)
			}
			for _, v := range []float64{tt.lo, tt.hi} {
				if f := a.frac(v); f < 0 || f > 1 {
					t.Errorf("frac(%g) = %g, outside [0, 1]", v, f)
				}
			}
		})
	}
}

func TestLogAxis(t *testing.T) {
	tests := []struct {
		name       string
		lo, hi     float64
		wantLabels []string
	}{
		{"decades", 1, 100000, []string{"1", "10", "100", "1k", "10k", "100k"}},
		{"inside decades", 3, 4500, []string{"1", "10", "100", "1k", "10k"}},
		{"exact powers", 1000, 1000, []string{"1k", "10k"}},
		{"fractions", 0.002, 0.5, []string{"0.001", "0.01", "0.1", "1"}},
		{"tiny", 2e-6, 3e-5, []string{"1e-06", "1e-05", "0.0001"}},
		{"wide range thins ticks", 1, 1e12, []string{"1", "100", "10k", "1M", "100M", "10G", "1T"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, err := newAxis(true, tt.lo, tt.hi)
			if err != nil {
				t.Fatal(err)
			}
			if got := a.labels(); !slices.Equal(got, tt.wantLabels) {
				t.Errorf("labels = %q, want %q", got, tt.wantLabels)
			}
			if f := a.frac(a.ticks[0]); f != 0 {
				t.Errorf("first tick at %g, want 0", f)
			}
			if f := a.frac(a.ticks[len(a.ticks)-1]); math.Abs(f-1) > 1e-12 {
				t.Errorf("last tick at %g, want 1", f)
			}
		})
	}
}

func TestAxisRangeTooWide(t *testing.T) {
	if _, err := newAxis(false, -math.MaxFloat64, math.MaxFloat64); !errors.Is(err, errRangeTooWide) {
		t.Errorf("linear axis over all float64: err = %v, want %v", err, errRangeTooWide)
	}
	if _, err := newAxis(true, 1e-320, 1); !errors.Is(err, errRangeTooWide) {
		t.Errorf("log axis reaching subnormals: err = %v, want %v", err, errRangeTooWide)
	}
}

func TestFormatTick(t *testing.T) {
	tests := []struct {
		v, step float64
		want    string
	}{
		{0, 1, "0"},
		{math.Copysign(0, -1), 1, "0"},
		{1000, 1000, "1k"},
		{50000, 10000, "50k"},
		{1500, 500, "1.5k"},
		{0.5, 0.1, "0.5"},
		{12.3, 0.1, "12.3"},
		{0.1 * 3, 0.1, "0.3"},
		{-2500, 500, "-2.5k"},
		{3e9, 1e9, "3G"},
		{2e15, 1e15, "2e+15"},
	}
	for _, tt := range tests {
		if got := formatTick(tt.v, tt.step); got != tt.want {
			t.Errorf("formatTick(%g, %g) = %q, want %q", tt.v, tt.step, got, tt.want)
		}
	}
}
