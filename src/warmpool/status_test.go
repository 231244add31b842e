package warmpool

import (
	"slices"
	"testing"

	"github.com/cocoonstack/sandbox-operator/src/sandbox"
	"github.com/cocoonstack/sandbox-operator/src/sandboxd"
)

func TestSplitShares(t *testing.T) {
	cases := []struct {
		total   int
		weights []int
		want    []int
	}{
		{10, []int{1}, []int{10}},
		{10, []int{1, 1}, []int{5, 5}},
		{9, []int{1, 1}, []int{5, 4}}, // tie goes to the first
		{7, []int{3, 1}, []int{5, 2}}, // 5.25 / 1.75
		{3, []int{0, 5}, []int{0, 3}},
		{0, []int{2, 2}, []int{0, 0}},
		{4, []int{0, 0}, []int{0, 0}},
		{100, []int{1, 1, 1}, []int{34, 33, 33}},
	}
	for _, c := range cases {
		if got := splitShares(c.total, c.weights); !slices.Equal(got, c.want) {
			t.Errorf("splitShares(%d, %v) = %v, want %v", c.total, c.weights, got, c.want)
		}
	}
	// Any split of a positive weight vector sums to the total.
	for total := range 50 {
		w := []int{7, 0, 3, 11, 1}
		s := 0
		for _, v := range splitShares(total, w) {
			s += v
		}
		if s != total {
			t.Fatalf("splitShares(%d, %v) sums to %d", total, w, s)
		}
	}
}

func TestObservedByKey(t *testing.T) {
	base := sandbox.PoolKey{Template: "base", Net: "none", Size: "small"}
	other := sandbox.PoolKey{Template: "old", Net: "none", Size: "small"}
	infos := []*sandboxd.Info{
		{Pools: []sandboxd.PoolStatus{{Key: base, Warm: 3, Refilling: 1, Target: 5}, {Key: other, Warm: 9}}},
		nil, // a node that has not answered yet
		// A row with empty net and size is the same key after defaults.
		{Pools: []sandboxd.PoolStatus{{Key: sandbox.PoolKey{Template: "base"}, Warm: 2, Target: 2}}},
	}
	got := observedByKey(infos, map[sandbox.PoolKey]int{base: 7})
	if got[base] != (observed{Replicas: 6, Ready: 5}) {
		t.Errorf("base observed %+v, want replicas 6 (warm+refilling) and ready 5 (warm)", got[base])
	}
	if _, ok := got[other]; ok {
		t.Errorf("a pool no SandboxWarmPool wants is reported: %+v", got[other])
	}
}
