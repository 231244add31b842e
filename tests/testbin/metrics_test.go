package testbin

import (
	"strings"
	"testing"
)

func TestGoroutines(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
		ok   bool
	}{
		{"# HELP go_goroutines Number of goroutines.\n# TYPE go_goroutines gauge\ngo_goroutines 42\n", 42, true},
		{"go_gc_duration_seconds 1\ngo_goroutines 1.37e+02\n", 137, true},
		{"go_goroutines_total 3\n", 0, false},
		{"go_goroutines many\n", 0, false},
		{"", 0, false},
	} {
		got, err := Goroutines(strings.NewReader(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("Goroutines(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
