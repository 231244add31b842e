package fill

import (
	"maps"
	"testing"

	"github.com/cocoonstack/sandbox-operator/tools/scale/stats"
)

func TestWritesMinus(t *testing.T) {
	before := Writes{Total: 10, ByResource: map[string]int{"a": 4, "b": 6}}
	after := Writes{Total: 17, ByResource: map[string]int{"a": 4, "b": 9, "c": 4}}
	got := after.Minus(before)
	if got.Total != 7 || !maps.Equal(got.ByResource, map[string]int{"b": 3, "c": 4}) {
		t.Errorf("got %+v", got)
	}
}

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	} {
		if got := stats.Median(tc.in); got != tc.want {
			t.Errorf("stats.Median(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestShareRange(t *testing.T) {
	lo, hi := shareRange(map[string]int{"a": 3, "b": 2}, []string{"a", "b", "c"})
	if lo != 0 || hi != 3 {
		t.Errorf("got %d..%d, want 0..3", lo, hi)
	}
}
