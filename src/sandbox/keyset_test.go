package sandbox

import (
	"cmp"
	"testing"
)

func TestResumeAfter(t *testing.T) {
	sorted := []int{10, 20, 30, 40}
	for key, want := range map[int]int{0: 0, 10: 1, 15: 1, 20: 2, 40: 4, 99: 4} {
		if got := ResumeAfter(sorted, key, cmp.Compare[int]); got != want {
			t.Errorf("ResumeAfter(%d) = %d, want %d", key, got, want)
		}
	}
	// A descending order is the comparison's business.
	desc := []int{40, 30, 20, 10}
	if got := ResumeAfter(desc, 30, func(a, b int) int { return cmp.Compare(b, a) }); got != 2 {
		t.Errorf("descending ResumeAfter(30) = %d, want 2", got)
	}
	if got := ResumeAfter([]int(nil), 1, cmp.Compare[int]); got != 0 {
		t.Errorf("empty list resumes at %d", got)
	}
}
