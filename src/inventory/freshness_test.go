package inventory

import (
	"maps"
	"slices"
	"testing"
	"time"
)

func TestFreshNodes(t *testing.T) {
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	window := 90 * time.Second
	ago := func(d time.Duration) time.Time { return now.Add(-d) }
	var none time.Time

	cases := []struct {
		name   string
		stamps map[string]time.Time
		now    time.Time
		want   []string
	}{
		{name: "empty fleet", stamps: map[string]time.Time{}, want: nil},
		{
			name:   "nobody stamps: every node kept",
			stamps: map[string]time.Time{"a": none, "b": none},
			want:   []string{"a", "b"},
		},
		{
			name:   "unstamped is stale once any node stamps",
			stamps: map[string]time.Time{"a": none, "b": ago(0)},
			want:   []string{"b"},
		},
		{
			name:   "within the window",
			stamps: map[string]time.Time{"a": ago(0), "b": ago(60 * time.Second)},
			want:   []string{"a", "b"},
		},
		{
			name:   "exactly the window is still fresh",
			stamps: map[string]time.Time{"a": ago(0), "b": ago(window)},
			want:   []string{"a", "b"},
		},
		{
			name:   "past the window is stale",
			stamps: map[string]time.Time{"a": ago(0), "b": ago(window + time.Nanosecond)},
			want:   []string{"a"},
		},
		{
			name:   "age is against the newest publish, not the clock: an outage keeps the fleet",
			stamps: map[string]time.Time{"a": ago(time.Hour), "b": ago(time.Hour + 30*time.Second)},
			want:   []string{"a", "b"},
		},
		{
			name:   "a one-node fleet that stopped publishing is kept",
			stamps: map[string]time.Time{"a": ago(24 * time.Hour)},
			want:   []string{"a"},
		},
		{
			name:   "a node running ahead cannot evict the rest (newest capped by now)",
			stamps: map[string]time.Time{"ahead": now.Add(time.Hour), "b": ago(30 * time.Second), "c": ago(80 * time.Second)},
			want:   []string{"ahead", "b", "c"},
		},
		{
			name:   "with a node ahead, the cap still drops a node old by the clock",
			stamps: map[string]time.Time{"ahead": now.Add(time.Hour), "b": ago(window + time.Second)},
			want:   []string{"ahead"},
		},
		{
			name:   "the newest stamp in the past is not capped",
			stamps: map[string]time.Time{"a": ago(10 * time.Minute), "b": ago(10*time.Minute + window + time.Second)},
			want:   []string{"a"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := slices.Sorted(maps.Keys(freshNodes(tc.stamps, now, window)))
			if !slices.Equal(got, tc.want) {
				t.Fatalf("fresh = %v, want %v", got, tc.want)
			}
		})
	}
}
